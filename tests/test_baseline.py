"""The baseline as a team adopting grist-lsp uses it: write it today, see only new bugs tomorrow.

Static-only runs throughout: a baseline matches sites whatever their status, so the
engine is not what is tested here.
"""

from __future__ import annotations

import json
from pathlib import Path

from grist_lsp.baseline import keys
from grist_lsp.check import CheckOptions, check_paths
from grist_lsp.output import render_sarif

TODAY = """import torch


def normalize(x: torch.Tensor, total):
    return x / total
"""

# Tomorrow: lines inserted above the old division, and a new bug below it.
TOMORROW = """import torch

EPS = 1e-8
SCALE = 2.0


def helper(v):
    return v * SCALE


def normalize(x: torch.Tensor, total):
    return x / total


def entropy(p):
    return -(p * torch.log(p)).sum()
"""


def _json(result) -> dict:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_baseline_written_today_leaves_only_tomorrows_new_bug(grist_cli, write_tree) -> None:
    root = write_tree({"pkg/stats.py": TODAY})
    written = grist_cli("--check", ".", "--static-only", "--write-baseline", "grist-baseline.json", cwd=root)
    assert written.returncode == 0, written.stderr
    assert "wrote 1 finding to the baseline grist-baseline.json" in written.stderr
    recorded = json.loads((root / "grist-baseline.json").read_text())["findings"]
    assert [(f["rule"], f["file"], f["line"]) for f in recorded] == [("GRIST105", "pkg/stats.py", 5)]

    (root / "pkg/stats.py").write_text(TOMORROW, encoding="utf-8")
    data = _json(
        grist_cli(
            "--check", ".", "--static-only", "--baseline", "grist-baseline.json", "--format", "json", cwd=root
        )
    )
    assert [(f["file"], f["line"], f["kind"]) for f in data["findings"]] == [("pkg/stats.py", 16, "log")]
    assert data["stats"]["baselined"] == 1

    text = grist_cli("--check", ".", "--static-only", "--baseline", "grist-baseline.json", cwd=root).stdout
    assert text.splitlines()[-1] == (
        "Found 1 possible in 1 file; 1 left out by the baseline (static pass only)."
    )

    # Without the baseline both are there: it filtered, it did not hide the file.
    everything = _json(grist_cli("--check", ".", "--static-only", "--format", "json", cwd=root))
    assert sorted(f["line"] for f in everything["findings"]) == [12, 16]


def test_baseline_from_the_config_and_writing_ignores_it(grist_cli, write_tree) -> None:
    root = write_tree(
        {"pyproject.toml": '[tool.grist]\nbaseline = "ci/grist-baseline.json"\n', "src/m.py": TODAY}
    )
    (root / "ci").mkdir()
    # Writing a baseline must see every finding, even with one configured (which does not exist yet).
    written = grist_cli(
        "--check", ".", "--static-only", "--write-baseline", "ci/grist-baseline.json", cwd=root
    )
    assert written.returncode == 0, written.stderr
    (root / "src/m.py").write_text(TOMORROW, encoding="utf-8")
    # Run from another folder: the configured path is relative to the pyproject.toml.
    data = _json(grist_cli("--check", ".", "--static-only", "--format", "json", cwd=root / "src"))
    assert [f["line"] for f in data["findings"]] == [16] and data["stats"]["baselined"] == 1


def test_missing_or_broken_baseline_is_a_usage_error(grist_cli, write_tree) -> None:
    root = write_tree({"m.py": TODAY, "broken.json": "{not json"})
    missing = grist_cli("--check", ".", "--static-only", "--baseline", "nope.json", cwd=root)
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "--write-baseline" in missing.stderr
    broken = grist_cli("--check", ".", "--static-only", "--baseline", "broken.json", cwd=root)
    assert broken.returncode == 2 and "broken.json" in broken.stderr and "not valid JSON" in broken.stderr
    configured = write_tree({"pyproject.toml": '[tool.grist]\nbaseline = "gone.json"\n'})
    result = grist_cli("--check", ".", "--static-only", cwd=configured)
    assert result.returncode == 2 and "pyproject.toml" in result.stderr and "`baseline`" in result.stderr


def test_baseline_and_sarif_share_one_fingerprint(write_tree) -> None:
    root = write_tree({"m.py": TOMORROW, ".git/HEAD": "ref: refs/heads/main\n"})
    report = check_paths([str(root)], CheckOptions(static_only=True))
    sarif = json.loads(render_sarif(report))["runs"][0]["results"]
    assert [r["partialFingerprints"]["gristFinding/v1"] for r in sarif] == [
        fp for (_, _, fp), _ in keys(report.verdicts, Path(root))
    ]
