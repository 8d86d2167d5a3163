"""One seed, one report: at any ``--jobs``, under load, and a search the clock stops says so.

The engine counts its budgets in runs and training steps (``dynamic/budget.py``); the clock
only caps a search whose runs are slow. These tests run the real command line and compare
whole JSON reports, with the fields ``bench/reproducible.py`` defines as times taken out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.dynamic.budget import runs_for
from grist_lsp.dynamic.engine import confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.model import Status

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from reproducible import comparable, differences  # noqa: E402


def _check(args: list[str], cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        # --no-cache: each run searches (a cached answer would make the comparison vacuous).
        [sys.executable, "-m", "grist_lsp", "--check", *args, "--format", "json", "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture
def burner():
    """One busy process beside the check (a CPU burner), killed by its pid afterwards."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield proc
    proc.kill()
    proc.wait()


def test_one_seed_gives_one_report_at_any_jobs_and_under_load(burner):
    """``examples/vae.py`` (three sites, each confirmed): ``-j 1`` on its own and ``-j 2`` with a
    busy process beside it give the same report, witness for witness, times aside."""
    args = ["examples/vae.py", "--seed", "0", "--budget", "1"]
    busy = _check([*args, "-j", "2"], REPO)
    burner.kill()
    burner.wait()
    alone = _check([*args, "-j", "1"], REPO)
    assert alone["stats"]["confirmed"] == 3, alone["stats"]
    assert all(f["witness"]["iterations"] > 0 for f in alone["findings"] if f["status"] == "confirmed")
    assert differences(comparable(alone), comparable(busy)) == []


SLOW = """import time

import torch


def spread(x):
    begun = time.process_time()
    while time.process_time() - begun < 0.2:  # 0.2 s of work a run, not of waiting
        pass
    return torch.log(x.max() - x.min() + 1.0)


x = torch.randn(4)
print(spread(x))
"""


def test_a_search_the_clock_stops_says_so_and_after_how_many_runs(tmp_path):
    """Each run of this script takes 0.2 CPU seconds, far slower than a budget's runs are priced
    at: the clock (the safety cap) stops the search before its runs are used, and the reason
    says so."""
    path = tmp_path / "slow.py"
    path.write_text(SLOW, encoding="utf-8")
    verdicts = analyze_source(str(path), SLOW)
    assert [(v.site.span.start_line, v.status) for v in verdicts] == [(10, Status.POSSIBLE)]
    budget = 0.5
    out = confirm(str(path), SLOW, verdicts, EngineOptions(budget=budget, timeout=20.0, seed=0))
    (log,) = [v for v in out if v.site.op]
    assert log.status is Status.POSSIBLE, log.reason
    assert "stopped by the clock after" in log.reason, log.reason
    runs = int(log.reason.split("stopped by the clock after ")[1].split()[0])
    assert 0 < runs < runs_for(budget)
