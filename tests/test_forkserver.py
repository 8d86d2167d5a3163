"""One torch start-up per file (``dynamic/executors/forkserver.py``): every child of a check is forked from
the file's server, and a child that crashes, hangs or runs out of memory loses nobody else's work."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from grist_lsp.check import CheckOptions, check_paths
from grist_lsp.dynamic import engine
from grist_lsp.dynamic.executors import forkserver
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.dynamic.protocol import Message, RunTask, TaskResult, task_line
from grist_lsp.dynamic.verify import VERIFY_MODULE, SharedChild
from grist_lsp.model import Status

# A confirmed log with a fix to verify: a search, a replay, the fix's replay and output runs.
PROGRAM = """import torch

x = torch.randn(8)
y = torch.log(x)
print(y.sum())
"""


def _counted(paths: list[str], jobs: int | None = None) -> tuple[Any, list[tuple[str, bool]], list[int]]:
    """One check of ``paths`` with every child start recorded: (report, [(module, forked)], servers)."""
    children: list[tuple[str, bool]] = []
    servers: list[int] = []
    child_init, server_init = engine.Subprocess.__init__, forkserver.ForkServer.__init__

    def child(self: engine.Subprocess, module: str, *args: Any, **kwargs: Any) -> None:
        children.append((module, kwargs.get("server") is not None))
        child_init(self, module, *args, **kwargs)

    def server(self: forkserver.ForkServer, *args: Any, **kwargs: Any) -> None:
        server_init(self, *args, **kwargs)
        servers.append(self._proc.pid)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine.Subprocess, "__init__", child)
        mp.setattr(forkserver.ForkServer, "__init__", server)
        report = check_paths(paths, CheckOptions(budget=2.0, jobs=jobs, no_cache=True))
    return report, children, servers


@pytest.fixture(scope="module")
def counted_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[tuple[str, bool]], list[int]]:
    folder = tmp_path_factory.mktemp("forked")
    program = folder / "prog.py"
    program.write_text(PROGRAM)
    return _counted([str(program)])


def test_a_check_with_a_verified_fix_imports_torch_once(counted_check: Any) -> None:
    report, children, servers = counted_check
    [log] = [v for v in report.verdicts if v.site.op == "torch.log"]
    assert log.status is Status.CONFIRMED and log.site.span.start_line == 4
    assert log.witness is not None and log.witness.replayed
    assert any(f.verified for f in log.fixes), [f.note for f in log.fixes]
    # One process imported torch (the server); the search worker and the warm child that replayed
    # the witness and ran the fix checks were forked from it, none started on its own.
    assert len(servers) == 1
    assert {m for m, _ in children} >= {VERIFY_MODULE, engine.WORKER_MODULE}
    assert all(forked for _, forked in children), children


def test_the_server_and_its_children_are_gone_after_the_check(counted_check: Any) -> None:
    _, _, servers = counted_check
    for pid in servers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_files_of_one_project_checked_at_once_share_one_server(tmp_path: Path) -> None:
    # Two files, each with a confirmed log and a fix to verify, checked two at a time (two
    # jobs): one process imports torch for both, and every child of either is forked from it.
    for name in ("first.py", "second.py"):
        (tmp_path / name).write_text(PROGRAM)
    report, children, servers = _counted([str(tmp_path)], jobs=2)
    logs = sorted((v.site.file, v.status) for v in report.verdicts if v.site.op == "torch.log")
    assert logs == [(str(tmp_path / n), Status.CONFIRMED) for n in ("first.py", "second.py")], report.warnings
    assert all(any(f.verified for f in v.fixes) for v in report.verdicts if v.site.op == "torch.log")
    assert len(servers) == 1
    assert [m for m, _ in children].count(VERIFY_MODULE) >= 2  # a warm child per file
    assert all(forked for _, forked in children), children
    for pid in servers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("shared")
    program = folder / "prog.py"
    program.write_text(PROGRAM)
    child = SharedChild(EngineOptions(project_root=str(folder), memory_mb=2048), str(program))
    child.start()
    yield child, program
    child.close()


def _run(shared: SharedChild, program: Path, text: str, seconds: float) -> tuple[engine.WorkerResult, dict]:
    """``text`` run once as ``program``'s script in a child forked from ``shared``'s server."""
    answers: dict[int, dict] = {}

    def on_line(msg: Message) -> None:
        if isinstance(msg, TaskResult):
            answers[msg.id] = msg.result

    child = shared.child(VERIFY_MODULE)
    child.start(on_line)
    out = os.path.join(shared.writable, f"out-{threading.get_ident()}-{len(text)}.pt")
    child.send_line(task_line(RunTask(str(program), text, f"script:{program}", 0, out), 1))
    return child.finish(seconds), answers.get(1, {})


def test_a_crash_a_hang_and_an_out_of_memory_child_lose_nothing_of_the_others(shared: Any) -> None:
    child, program = shared
    runs = {
        "crash": ("import os\nos.abort()\n", 60.0),
        "hang": ("while True:\n    pass\n", 3.0),
        "memory": ("x = bytearray(3 * 2**30)\nprint(len(x))\n", 60.0),
        "healthy": ("import torch\nprint(torch.ones(3).sum().item() * 2)\n", 60.0),
    }
    results: dict[str, tuple[engine.WorkerResult, dict]] = {}

    def one(name: str) -> None:
        results[name] = _run(child, program, *runs[name])

    threads = [threading.Thread(target=one, args=(name,)) for name in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    crash, _ = results["crash"]
    assert crash.returncode == -6 and not crash.finished  # SIGABRT, as a fresh process shows it
    hang, _ = results["hang"]
    assert hang.timed_out and hang.returncode is not None
    assert "Fatal Python error" in hang.stderr  # the stack dump a hang's message quotes
    _, memory = results["memory"]
    assert memory.get("raised") == "MemoryError"  # the per-child cap, applied after the fork
    healthy, answer = results["healthy"]
    assert healthy.finished and answer.get("printed") == [6.0] and answer.get("raised") is None
    # The server outlives them all: the next child is forked as quickly as the first.
    after, answer = _run(child, program, runs["healthy"][0], 60.0)
    assert after.finished and answer.get("printed") == [6.0]


def test_a_task_sent_long_after_the_warm_child_started_has_its_whole_time(shared: Any) -> None:
    """A replay comes after the search, which may take longer than a replay's time: its clock
    starts when it is sent, not when the warm child became ready."""
    child, program = shared
    seconds = 5.0
    child.start()
    while not child._child.ready:
        time.sleep(0.05)
    time.sleep(max(0.0, child._child.ready[0] + seconds + 0.5 - time.monotonic()))
    out = str(Path(child.writable) / "late.pt")
    answer = child.run(RunTask(str(program), "print(7)\n", f"script:{program}", 0, out), seconds)
    assert answer.get("printed") == [7.0], answer


def test_a_forked_child_runs_in_the_files_sandbox(shared: Any) -> None:
    child, program = shared
    target = program.parent / "written.txt"
    res, answer = _run(child, program, f"open({str(target)!r}, 'w').write('x')\n", 60.0)
    assert res.finished and answer.get("raised") is None
    assert not target.exists()  # thrown away (bubblewrap) or refused (the audit hook)
    assert res.blocked and any(b.path.endswith("written.txt") for b in res.blocked)


def test_the_servers_children_die_with_the_caller(tmp_path: Path) -> None:
    """A check killed outright leaves no torch process behind: the server's socket closes."""
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    script = f"""
import os, sys, time
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.dynamic.verify import SharedChild
child = SharedChild(EngineOptions(project_root={str(tmp_path)!r}), {str(program)!r})
child.start()
worker = child.child("grist_lsp.dynamic.worker")
print(child._server._proc.pid, worker.proc.pid, flush=True)
time.sleep(60)
"""
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert caller.stdout is not None
    server_pid, worker_pid = map(int, caller.stdout.readline().split())
    caller.kill()
    caller.wait()
    for pid in (server_pid, worker_pid):
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # A zombie of ours is gone too: only its exit status is left for its parent.
            if _zombie(pid):
                break
            threading.Event().wait(0.05)
        else:
            pytest.fail(f"process {pid} outlived the check that started it")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_server_that_went_away_leaves_children_started_the_usual_way(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    shared = SharedChild(EngineOptions(project_root=str(tmp_path)), str(program))
    try:
        shared.start()
        server = shared._server
        assert server is not None
        os.kill(_server_python(server._proc.pid), 9)
        assert server.status_of(-1, 30.0) == forkserver.GONE  # the parent saw it go
        out = str(Path(shared.writable) / "out.pt")
        text = "print(21 * 2)\n"
        answer = shared.run(RunTask(str(program), text, f"script:{program}", 0, out), 60.0)
        if "error" in answer:  # the warm child died with its server: the next task starts anew
            answer = shared.run(RunTask(str(program), text, f"script:{program}", 0, out), 60.0)
        assert answer.get("printed") == [42.0], answer
    finally:
        shared.close()


def _server_python(launched: int) -> int:
    """The fork server's own Python process: ``launched`` itself, or its child under bubblewrap."""
    for _ in range(600):
        todo = [launched]
        while todo:
            pid = todo.pop(0)
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
            except OSError:
                continue
            if (
                os.path.basename(argv[0]).startswith(b"python")
                and b"grist_lsp.dynamic.executors.forkserver" in argv
            ):
                return pid
        time.sleep(0.05)
    pytest.fail("the fork server's Python process never appeared")
