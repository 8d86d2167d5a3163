"""The child process every unit of work that runs user code goes through.

Owns ``Subprocess`` (a ``python -m module`` child fed JSON lines, read back on a pipe of its
own, killed as a process group), what such a child is started with (environment, memory cap,
the sandbox's confinement: ``child_confinement``) and what the child does first
(``open_child_channel``). The engine, the fix checks and the spare children start their
children here; this module imports neither of them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TextIO

from .. import protocol
from ..options import EngineOptions
from ..protocol import BadEntry, Blocked, Done, Message, Ready, ReplayAnswer, RunError, SiteReport, Task
from ..sandbox import Confinement, Sandbox, cache_folder, install_guard

if TYPE_CHECKING:
    from ..sandbox import Launch
    from .forkserver import Forked, ForkServer

WORKER_MODULE = "grist_lsp.dynamic.worker"
STARTUP_SECONDS = 60.0  # importing torch in a child, on a machine that may be busy


@dataclass
class WorkerResult:
    sites: dict[str, SiteReport] = field(default_factory=dict)  # a worker's answers by site key
    replays: dict[str, ReplayAnswer] = field(default_factory=dict)  # a replay child's, by site key
    errors: list[RunError] = field(default_factory=list)
    finished: bool = False
    returncode: int | None = None
    stderr: str = ""
    timed_out: bool = False
    cancelled: bool = False
    blocked: list[Blocked] = field(default_factory=list)  # what the sandbox refused the program
    bad_entry: BadEntry | None = None  # an explicit entry the worker could not use


def apply_memory_limit() -> None:
    """In a child: cap the address space at ``GRIST_MEMORY_MB`` (set by the parent).

    Done by the child itself rather than in a ``preexec_fn``, which is unsafe when the parent
    has threads (the language server calls ``confirm`` from one).
    """
    mb = os.environ.get("GRIST_MEMORY_MB")
    if not mb:
        return
    try:
        import resource

        limit = int(mb) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass


def open_child_channel() -> TextIO:
    """In a child (worker or replayer): apply the limits and return the result stream.

    Results go to the descriptor named by ``GRIST_RESULT_FD``; the user's prints are sent to
    stderr so they can never corrupt that stream. Writes the ``ready`` line the parent waits for
    before its per-run deadline starts (torch start-up on a busy machine is not the program's fault).
    """
    import torch

    torch.set_num_threads(1)
    apply_memory_limit()
    fd = int(os.environ.get("GRIST_RESULT_FD", "1"))
    result = os.fdopen(os.dup(fd), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    install_guard(result.fileno())
    # The pid is for a stack dump on a timeout: under bubblewrap the parent's child is bwrap.
    result.write(protocol.line(Ready(os.getpid())))
    result.flush()
    return result


def worker_env() -> dict[str, str]:
    """The environment of every child that runs user code (one thread, unbuffered, faulthandler)."""
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONFAULTHANDLER": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def sandbox_of(options: EngineOptions) -> Sandbox:
    """The sandbox every child started with ``options`` runs in."""
    return Sandbox(options.sandbox, options.sandbox_probe)


def _views(options: EngineOptions, path: str | None) -> list[str]:
    """The folders a program may seem to write (throwaway views): its project and the working folder."""
    project = options.project_root or (os.path.dirname(os.path.abspath(path)) if path else None)
    return [p for p in (project, os.getcwd()) if p]


def child_confinement(
    options: EngineOptions, path: str, writable: tuple[str, ...] = ()
) -> Confinement | None:
    """How a child running ``path``'s program is confined (None: sandbox off); grist's own cache
    and ``writable`` (a fix check's output folder) are really written."""
    return sandbox_of(options).confine(_views(options, path), [cache_folder(), *writable])


def sandbox_warning(options: EngineOptions) -> str | None:
    """One line for the user when the program will not run under the OS sandbox, and why."""
    return sandbox_of(options).warning(_views(options, None))


def _kill(proc: subprocess.Popen | Forked) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


class Subprocess:
    """A ``python -m module`` child: started early (torch imports while we wait), fed JSON lines.

    Requests go to stdin, one JSON document a line, as they come (``send``); JSON lines come
    back on a dedicated pipe (``GRIST_RESULT_FD``); stdout and stderr (the user's prints,
    faulthandler dumps) go to a temporary file. ``finish`` closes stdin and waits.
    """

    def __init__(
        self,
        module: str,
        memory_mb: int,
        confinement: Confinement | None = None,
        server: ForkServer | None = None,
    ) -> None:
        rfd, wfd = os.pipe()
        self.err = tempfile.TemporaryFile()
        self.child_pid: int | None = None  # the Python child's own pid, from its ready line
        self.launch: Launch | None = None
        self.proc: subprocess.Popen | Forked
        if server is not None:
            # Forked from the file's server, inside its sandbox: torch is already imported there.
            self.confinement = server.confinement
            self.proc = server.spawn(module, {"GRIST_MEMORY_MB": str(int(memory_mb))}, self.err, wfd)
        else:
            self.confinement = confinement
            self.proc = self._popen(module, memory_mb, wfd)
        os.close(wfd)
        self.rfd = rfd
        self.res = WorkerResult()
        self.started = time.monotonic()
        self.ready: list[float] = []
        self._reader: threading.Thread | None = None
        self._done = threading.Event()  # set by the reader with ``res.finished``: ``finish`` wakes at once
        # Writes go through a queue and a thread of their own: the child reads stdin only once
        # torch is imported, and a request larger than the pipe must not block the sender.
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._feed, name="grist-child-stdin", daemon=True).start()

    def _popen(self, module: str, memory_mb: int, wfd: int) -> subprocess.Popen:
        env = worker_env()
        env["GRIST_RESULT_FD"] = str(wfd)
        env["GRIST_MEMORY_MB"] = str(int(memory_mb))
        argv = [sys.executable, "-m", module]
        if self.confinement is not None:
            self.launch = self.confinement.start(argv, env)
            argv, env = self.launch.argv, self.launch.env
        # A session of its own: the whole process group (the user's children too) is killed at the end.
        # bwrap keeps its child in that group (no --new-session), so the group kill reaches it too.
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=self.err,
            stderr=self.err,
            pass_fds=(wfd,),
            env=env,
            start_new_session=True,
            close_fds=True,
        )

    def _feed(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None, "started with stdin=PIPE"
        try:
            while (data := self._outbox.get()) is not None:
                stdin.write(data)
                stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                stdin.close()
            except (BrokenPipeError, OSError):
                pass

    def start(self, on_line: Callable[[Message], None] | None = None) -> None:
        """Begin reading the child's result lines (once)."""
        if self._reader is not None:
            return
        res = self.res

        def reader() -> None:
            with os.fdopen(self.rfd, "r") as f:
                for line in f:
                    msg = protocol.decode(line)
                    if msg is None:
                        continue
                    if isinstance(msg, SiteReport):
                        res.sites[msg.key] = msg
                    elif isinstance(msg, ReplayAnswer):
                        res.replays[msg.key] = msg
                    elif isinstance(msg, RunError):
                        res.errors.append(msg)
                    elif isinstance(msg, Done):
                        res.finished = True
                        self._done.set()
                    elif isinstance(msg, Ready):
                        self.ready.append(time.monotonic())
                        self.child_pid = msg.pid
                    elif isinstance(msg, Blocked):
                        res.blocked.append(msg)
                    elif isinstance(msg, BadEntry):
                        res.bad_entry = msg
                    if on_line:
                        on_line(msg)

        self._reader = threading.Thread(target=reader, name="grist-child-reader", daemon=True)
        self._reader.start()

    def send(self, request: dict) -> None:
        """One request line to the child's stdin (never blocks)."""
        self.send_line(json.dumps(request) + "\n")

    def send_line(self, line: str) -> None:
        """One line, already encoded as JSON, to the child's stdin (never blocks)."""
        self._outbox.put(line.encode())

    def finish(self, seconds: float, cancel: threading.Event | None = None) -> WorkerResult:
        """Close stdin and wait; kill the child ``seconds`` after now or after it was ready
        (torch imported), whichever is later.

        Start-up is timed separately (``STARTUP_SECONDS``) so that a loaded machine, where
        importing torch alone can take many seconds, does not eat the program's time.
        """
        self.start()
        self._outbox.put(None)
        res, proc, ready = self.res, self.proc, self.ready
        now = time.monotonic()
        while True:
            code = proc.poll()
            if code is not None:
                res.returncode = code
                break
            if res.finished:
                # Every result is in: the interpreter's own teardown is nobody's wait.
                _kill(proc)
                res.returncode = proc.wait()
                break
            if cancel is not None and cancel.is_set():
                res.cancelled = True
                _kill(proc)
            elif time.monotonic() > max(now, ready[0] if ready else self.started + STARTUP_SECONDS) + seconds:
                res.timed_out = True
                # SIGABRT first: faulthandler prints where the program is stuck, for the message.
                try:
                    if self.child_pid and self.confinement is not None:
                        os.kill(self.child_pid, signal.SIGABRT)
                    else:
                        proc.send_signal(signal.SIGABRT)
                    proc.wait(timeout=1.0)
                except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                    pass
                _kill(proc)
            self._done.wait(0.05)
        _kill(proc)  # stray children of the user's program
        res.returncode = self._child_status(res.returncode)
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        if self.launch is not None:
            self.launch.cleanup()
        self.err.seek(0)
        res.stderr = self.err.read().decode("utf-8", errors="replace")[-20000:]
        self.err.close()
        return res

    def _child_status(self, code: int | None) -> int | None:
        """bwrap exits with 128 + N when its child dies of signal N: say it as Popen would (-N)."""
        # A forked child's status comes from its server, which is its real parent: never bwrap's.
        bwrapped = (
            self.launch is not None and self.confinement is not None and self.confinement.mode == "bwrap"
        )
        if bwrapped and code is not None and code > 128 and (code - 128) in signal.Signals._value2member_map_:
            return -(code - 128)
        return code

    def communicate(
        self,
        request: dict,
        seconds: float,
        on_line: Callable[[Message], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> WorkerResult:
        """One request, then ``finish``."""
        self.start(on_line)
        self.send(request)
        return self.finish(seconds, cancel)

    def discard(self) -> None:
        self._outbox.put(None)
        _kill(self.proc)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self._reader is None:
            os.close(self.rfd)
        if self.launch is not None:
            self.launch.cleanup()
        self.err.close()


class WarmChild(Protocol):
    """A child kept warm by the caller for several tasks (``verify.SharedChild``), and the
    fork server the file's other children are made from."""

    def start(self) -> None: ...

    def run(self, task: Task, seconds: float) -> dict: ...

    def child(self, module: str) -> Subprocess: ...

    def close(self, used: bool = True) -> None:
        """End the child (``used``: it ran tasks, so it may exit by itself; else it is killed)."""
        ...
