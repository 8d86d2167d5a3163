"""`--executor ray` (``dynamic/executors/ray_tasks.py``): the CLI on a Ray cluster this module starts
on 127.0.0.1 (2 CPUs) reports what a local run reports; a task whose Ray worker dies is retried and
nothing is lost; without Ray the flag says how to install it (exit 2), and a local or static-only
run never imports Ray at all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the ray extra: pip install -e '.[dev,ray]' (CI installs it)")

CHECKOUT = str(Path(__file__).resolve().parents[1])
RAY_BIN = Path(sys.executable).parent / "ray"

PROGRAMS = {
    "logs.py": "import torch\n\nx = torch.randn(8)\ny = torch.log(x)\nprint(y.sum())\n",
    "ratio.py": "import torch\n\na = torch.randn(6)\nb = torch.randn(6)\nprint((a / b).sum())\n",
}
# The test's cluster and the checks that join it: no token (Ray 2.60 turns token auth on for a head
# whenever ~/.ray/auth_token exists, which an earlier local cluster may have written, and a driver
# given an address does not then send it).
RAY_ENV = {"RAY_AUTH_MODE": "disabled"}
# A package named ray that cannot be imported: a stand-in for an environment without the extra.
NO_RAY = "raise ImportError(\"No module named 'ray' (a stub of tests/test_ray_executor.py)\")\n"


def _grist(*args: str, cwd: Path, extra_path: str | None = None, env: dict[str, str] | None = None):
    script = Path(sys.executable).parent / "grist-lsp"
    paths = [p for p in (extra_path, CHECKOUT) if p]
    full = {
        **os.environ,
        "PYTHONIOENCODING": "utf-8",
        "PYTHONPATH": os.pathsep.join(paths),
        **RAY_ENV,
        **(env or {}),
    }
    full.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=full,
        stdin=subprocess.DEVNULL,
    )


def _findings(stdout: str) -> list[dict[str, Any]]:
    """The JSON report's findings without what may differ between runs of one seed: times."""
    found = json.loads(stdout)["findings"]
    for finding in found:
        if isinstance(finding.get("witness"), dict):
            finding["witness"].pop("seconds", None)
    return sorted(found, key=lambda f: json.dumps(f, sort_keys=True))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rayproj")
    for name, text in PROGRAMS.items():
        (root / name).write_text(text)
    stub = root.parent / f"{root.name}-noray" / "ray"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(NO_RAY)
    return root


@pytest.fixture(scope="module")
def no_ray(project: Path) -> str:
    """A PYTHONPATH entry whose ``ray`` raises ImportError when imported."""
    return str(project.parent / f"{project.name}-noray")


@pytest.fixture(scope="module")
def local_run(project: Path, no_ray: str) -> subprocess.CompletedProcess[str]:
    """The local run every Ray run is compared with; made where ``import ray`` fails, so it also
    shows that a local run never imports Ray."""
    return _grist(
        "--check", ".", "--budget", "1", "--jobs", "2", "--format", "json", "--no-cache",
        cwd=project, extra_path=no_ray,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A Ray head on 127.0.0.1 with 2 CPUs, its own temp folder, killed (its process group) after."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="grist-ray-", dir="/tmp")  # short: Ray's socket paths must fit
    head = subprocess.Popen(
        [
            str(RAY_BIN),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **RAY_ENV},
    )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert head.poll() is None, "ray start --head exited"
        time.sleep(0.5)
    try:
        yield address
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(head.pid, sig)
                head.wait(timeout=20)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


def test_a_ray_run_reports_the_same_findings_as_a_local_run(
    project: Path, cluster: str, local_run: subprocess.CompletedProcess[str]
) -> None:
    assert local_run.returncode == 1, local_run.stderr
    on_ray = _grist(
        "--check", ".", "--budget", "1", "--jobs", "2", "--format", "json",
        "--executor", "ray", "--ray-address", cluster, "--no-cache", cwd=project,
    )  # fmt: skip
    assert on_ray.returncode == 1, on_ray.stderr
    local = _findings(local_run.stdout)
    assert {f["status"] for f in local} >= {"confirmed"}, "the example must confirm something"
    assert _findings(on_ray.stdout) == local


def test_a_task_whose_ray_worker_dies_is_retried_and_nothing_is_lost(
    project: Path, cluster: str, local_run: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    tallies = tmp_path / "killed"
    tallies.mkdir()
    on_ray = _grist(
        "--check", ".", "--budget", "1", "--jobs", "2", "--format", "json",
        "--executor", "ray", "--ray-address", cluster, "--no-cache", cwd=project,
        env={"GRIST_TEST_RAY_KILL_ATTEMPTS": f"1:{tallies}"},
    )  # fmt: skip
    # Each file's first attempt killed its Ray worker, its second ran (one tally a file)...
    assert sorted(t.read_text() for t in tallies.iterdir()) == ["xx"] * len(PROGRAMS)
    # ... and the retries found all of it: the same report, no file given up.
    assert on_ray.returncode == 1, on_ray.stderr
    found = _findings(on_ray.stdout)
    assert not [f for f in found if f["status"] == "error"]
    assert found == _findings(local_run.stdout)


def test_without_ray_the_flag_says_how_to_install_it_and_exits_2(project: Path, no_ray: str) -> None:
    missing = _grist("--check", ".", "--executor", "ray", "--no-cache", cwd=project, extra_path=no_ray)
    assert missing.returncode == 2
    assert "pip install 'grist-lsp[ray]'" in missing.stderr
    assert missing.stdout == ""
    # A static-only run has nothing to send: it never imports Ray, so it works without it.
    static = _grist("--check", ".", "--executor", "ray", "--static-only", cwd=project, extra_path=no_ray)
    assert static.returncode == 0, static.stderr
    assert "possible" in static.stdout


def test_a_file_whose_ray_worker_dies_on_every_attempt_is_a_grist000_error(
    project: Path, cluster: str, tmp_path: Path
) -> None:
    tallies = tmp_path / "killed"
    tallies.mkdir()
    on_ray = _grist(
        "--check", "logs.py", "--budget", "1",
        "--executor", "ray", "--ray-address", cluster, "--no-cache", cwd=project,
        env={"GRIST_TEST_RAY_KILL_ATTEMPTS": f"99:{tallies}"},
    )  # fmt: skip
    assert [t.read_text() for t in tallies.iterdir()] == ["xxx"], "the first run and 2 retries"
    [error] = [line for line in on_ray.stdout.splitlines() if "GRIST000 [error]" in line]
    assert error.startswith(
        "logs.py:1:1: GRIST000 [error] not checked dynamically: the Ray worker checking it died on each of 3 attempts"
    )
    # The file's static finding stands; an error alone does not fail the run (--fail-on confirmed).
    assert "[possible]" in on_ray.stdout
    assert on_ray.returncode == 0, on_ray.stderr


def test_files_the_cache_answers_are_never_sent_to_ray(project: Path, cluster: str, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    local = _grist("--check", ".", "--budget", "1", "--format", "json", "--cache-dir", cache, cwd=project)
    tallies = tmp_path / "killed"
    tallies.mkdir()
    # Every task sent would kill its Ray worker: with every file cached, none is sent.
    on_ray = _grist(
        "--check", ".", "--budget", "1", "--format", "json", "--cache-dir", cache,
        "--executor", "ray", "--ray-address", cluster, cwd=project,
        env={"GRIST_TEST_RAY_KILL_ATTEMPTS": f"99:{tallies}"},
    )  # fmt: skip
    assert list(tallies.iterdir()) == []
    assert json.loads(on_ray.stdout)["stats"]["cached"] == len(PROGRAMS)
    assert _findings(on_ray.stdout) == _findings(local.stdout)
