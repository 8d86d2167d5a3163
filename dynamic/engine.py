"""The engine's public entry point: ``confirm`` possible sites in worker subprocesses.

Owns the parent side: splitting the sites over ``jobs`` workers, resource
limits (RLIMIT_AS, wall-clock deadline, process-group kill), streaming results,
cancellation, turning crashes/hangs into ``error`` verdicts, replaying every
witness in a fresh process before calling it confirmed, and writing
reproducers when asked. The user's code never runs in this process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TextIO

from grist_lsp.model import NOT_REPLAYED, Site, Status, Verdict, Witness, counted, file_error, to_json

# blocked_in: re-exported for the CLI, which reaches the engine through this module only.
from . import protocol
from .budget import CLOCK_CAP
from .failures import DISTRIBUTED_HINT, waited_in_distributed
from .protocol import (
    BadEntry,
    Blocked,
    Done,
    Message,
    Ready,
    ReplayAnswer,
    ReplayTask,
    RunError,
    SiteReport,
    Task,
)
from .sandbox import BwrapProbe, Confinement, Sandbox, blocked_in, blocked_note, cache_folder, install_guard  # noqa: F401

if TYPE_CHECKING:
    from .forkserver import Forked, ForkServer
    from .sandbox import Launch


@dataclass
class EngineOptions:
    """How hard and where to look. Times in seconds."""

    budget: float = 5.0  # search time per site
    seed: int = 0
    jobs: int = 1  # worker processes per file
    entries: list[str] = field(default_factory=list)  # "path.py:function" (--entry, [tool.grist] entries)
    # Absolute script path -> the command-line arguments it runs with (--script-args, [tool.grist] script-args).
    script_args: dict[str, list[str]] = field(default_factory=dict)
    project_root: str | None = None
    # Wall clock for starting the program and reaching its sites; a worker is killed after
    # timeout + budget * (its sites) + a small margin for shrinking and start-up.
    timeout: float = 30.0
    memory_mb: int = 4096  # address-space limit of a worker (RLIMIT_AS)
    write_reproducers: str | None = None  # folder for pytest reproducers of confirmed bugs
    # Enter the program only through this file (a test file or a script that imports the checked
    # module): how a check of that file reports bugs in the modules it runs.
    via: str | None = None
    sandbox: str = "auto"  # "auto": bubblewrap where it works, else an audit hook; "off": none
    # Whether bubblewrap works, asked once for every child started with these options.
    sandbox_probe: BwrapProbe = field(default_factory=BwrapProbe, repr=False, compare=False)


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


class UnusableEntry(Exception):
    """An explicit entry (``--entry`` / ``entries``) that a worker could not use: its message
    names the file, the function and what an entry must return. A usage error of the caller's,
    raised by ``confirm`` instead of verdicts found some other way."""


WORKER_MODULE = "grist_lsp.dynamic.worker"
STARTUP_SECONDS = 60.0  # importing torch in a child, on a machine that may be busy
# Wall seconds per CPU second of search the parent waits for before it kills a worker: searches are
# capped in CPU time (``budget.cap_clock``), and a busy machine stretches those into more wall time.
LOAD_ROOM = 3.0


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


def with_blocked_note(
    verdicts: list[Verdict], errors: list[Verdict], note: str | None
) -> tuple[list[Verdict], list[Verdict]]:
    """``note`` (what the sandbox blocked) added to the reason of the verdicts the engine ran,
    or of the file's errors when no site was reached."""
    if not note:
        return verdicts, errors
    ran = [v for v in verdicts if v.status in (Status.CONFIRMED, Status.POSSIBLE) and v.site.op]
    target = ran or errors
    noted = [dataclasses.replace(v, reason=f"{v.reason}; {note}" if v.reason else note) for v in target]
    swap = {id(v): n for v, n in zip(target, noted)}
    return [swap.get(id(v), v) for v in verdicts], [swap.get(id(v), v) for v in errors]


def _crash_location(stderr: str, target: str) -> int | None:
    """The innermost line of the target file in a faulthandler dump (most recent call first)."""
    for m in re.finditer(r'File "([^"]+)", line (\d+)', stderr):
        if os.path.abspath(m.group(1)) == target:
            return int(m.group(2))
    return None


def _worker_failure(path: str, res: WorkerResult, options: EngineOptions, seconds: float) -> Verdict | None:
    target = os.path.abspath(path)
    line = _crash_location(res.stderr, target)
    where = f" at {path}:{line}" if line else ""
    rc = res.returncode
    if res.finished and not res.timed_out:
        return None  # killed after its last result, or exited normally
    kind = "crash"
    if res.timed_out and waited_in_distributed(res.stderr):
        kind = "needs-distributed"
        msg = (
            f"{path}: the program needs torch.distributed: it waited for the other processes of its "
            f"process group{where} until it was stopped after {seconds:.0f} s; {DISTRIBUTED_HINT}"
        )
    elif res.timed_out:
        kind = "timeout"
        msg = (
            f"{path}: the program did not finish within {seconds:.0f} s{where} (a hang?): "
            "give a lighter entry with --entry file.py:function or raise the timeout"
        )
    elif rc is not None and rc < 0:
        sig = -rc
        if sig == signal.SIGSEGV:
            msg = f"{path}: the program crashed with a segmentation fault{where}: fix the native call there"
        elif sig == signal.SIGKILL:
            kind = "memory"
            msg = f"{path}: the program was killed{where} (out of memory? limit {options.memory_mb} MB)"
        else:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            msg = f"{path}: the program was stopped by signal {name}{where}"
    elif "MemoryError" in res.stderr or "can't allocate memory" in res.stderr:
        kind = "memory"
        msg = f"{path}: the program ran out of memory{where} (limit {options.memory_mb} MB): reduce what it allocates"
    elif not res.finished:
        last = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        msg = f"{path}: the engine's worker stopped (exit status {rc}){where}: {last[-1] if last else 'no output'}"
    else:
        return None
    return file_error(path, msg, line or 1, error_kind=kind)


def _render_message(site: Site, witness: Witness, detail: str) -> str:
    return detail or f"{site.op} produces {witness.result} ({witness.entry})"


class WarmChild(Protocol):
    """A child kept warm by the caller for several tasks (``verify.SharedChild``), and the
    fork server the file's other children are made from."""

    def start(self) -> None: ...

    def run(self, task: Task, seconds: float) -> dict: ...

    def child(self, module: str) -> Subprocess: ...


class WitnessReplays:
    """Each witness replayed in a fresh process as soon as a worker sends it, while the other sites
    are still searched: in a replay child of this call's own, started with the workers (its torch
    import overlaps their search), or in the caller's warm child, which then goes on to the fix
    checks without a start-up of its own."""

    def __init__(
        self,
        path: str,
        text: str,
        options: EngineOptions,
        confinement: Confinement | None,
        warm: WarmChild | None,
        on_answer: Callable[[str, ReplayAnswer], None] | None = None,
    ) -> None:
        self.path, self.text, self.warm, self.on_answer = path, text, warm, on_answer
        self.seconds = options.timeout + 10.0
        self.own: Subprocess | None = None
        self.answers: dict[str, ReplayAnswer] = {}
        self._queue: queue.Queue[tuple[str, Site, Witness] | None] = queue.Queue()
        if warm is None:
            self.own = Subprocess("grist_lsp.dynamic.replay", options.memory_mb, confinement)
            self.own.start()
            self.own.send({"type": "file", "text": text})
        else:
            warm.start()
            self._thread = threading.Thread(target=self._serve, name="grist-replays", daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        assert self.warm is not None
        while (item := self._queue.get()) is not None:
            key, site, witness = item
            res = self.warm.run(ReplayTask(self.path, self.text, site, witness), self.seconds)
            self.answers[key] = ReplayAnswer(
                key,
                bool(res.get("reproduced")),
                str(res.get("detail") or res.get("error", "")),
                res.get("result", ""),
            )
            if self.on_answer is not None:
                self.on_answer(key, self.answers[key])

    def submit(self, key: str, site: Site, witness: Witness) -> None:
        if self.own is not None:
            self.own.send({"type": "witness", "site": to_json(site), "witness": to_json(witness)})
        else:
            self._queue.put((key, site, witness))

    def results(self, count: int, cancel: threading.Event | None) -> dict[str, ReplayAnswer]:
        """Wait for the ``count`` replays sent (site key -> answer)."""
        if self.own is not None:
            return self.own.finish(self.seconds + 5.0 * count, cancel).replays
        self._queue.put(None)
        self._thread.join(self.seconds + 5.0 * count)
        return dict(self.answers)

    def discard(self) -> None:
        if self.own is not None:
            self.own.discard()
        else:
            self._queue.put(None)

    @property
    def reports(self) -> list[WorkerResult]:
        """What the replay child said besides its answers (actions the sandbox blocked)."""
        return [self.own.res] if self.own is not None else []


def confirm(
    path: str,
    text: str,
    verdicts: list[Verdict],
    options: EngineOptions,
    progress: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    warm: WarmChild | None = None,
    on_confirmed: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Possible verdicts -> confirmed (with a replayed Witness) where the search succeeds.

    Safe verdicts are untouched; a program that cannot run adds one ``error``
    verdict (import error, exception, hang, crash, out of memory) naming the line. An explicit
    entry that cannot be used raises ``UnusableEntry``.
    ``warm``: a child the caller keeps for later work (fix checks), used for the replays.
    ``on_confirmed``: called (from a helper thread) with each verdict as soon as its witness
    replayed, while the other sites are still searched, so an editor can show it at once;
    with ``warm`` only (without it the replays answer together at the end).
    With ``warm`` the workers are forked from its server (no torch start-up of their own).
    """
    targets = [v for v in verdicts if v.status is Status.POSSIBLE and v.site.op]
    if not targets or (cancel is not None and cancel.is_set()):
        return list(verdicts)
    sites = [v.site for v in verdicts if v.site.op]
    # One worker searches all of a file's sites, whatever ``jobs`` says (``jobs`` runs files, and
    # a file's fix checks, side by side). A site's result then depends on the seed and the options
    # only: in one worker the sites are searched in one fixed order, every recording run watches
    # them all, and a site broken by another site's search (``harvest``) is broken by the same run
    # at any ``--jobs``, where workers splitting the sites made each one's report depend on which
    # sites shared its worker. It also imports torch once per file, and a site no run reaches
    # holds no worker of its own; one training run already watched every site.
    groups = [targets]
    confinement = child_confinement(options, path)  # the sandbox: one per file, for all its children
    by_key = {v.site.key: v for v in targets}
    on_line = _SiteLines({k: v.site for k, v in by_key.items()}, len(targets), progress)

    def answered(key: str, replay: ReplayAnswer) -> None:
        verdict = _after_search(by_key[key], on_line.lines[key], replay)
        if on_confirmed is not None and verdict.status is Status.CONFIRMED:
            on_confirmed(verdict)

    replayer = WitnessReplays(path, text, options, confinement, warm, answered)
    on_line.replayer = replayer
    workers = [_WorkerRun(path, text, group, sites, options) for group in groups]
    forked = warm.child(WORKER_MODULE) if warm is not None else None
    threads = [
        threading.Thread(
            target=w.run,
            args=(on_line, cancel, confinement, forked if i == 0 else None),
            name=f"grist-worker-{i}",
        )
        for i, w in enumerate(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    results = [w.result for w in workers]
    bad = next((r.bad_entry for r in results if r.bad_entry is not None), None)
    if bad is not None:
        replayer.discard()
        raise UnusableEntry(bad.message)
    lines: dict[str, SiteReport] = {}
    for res in results:
        lines.update(res.sites)
    errors = _worker_errors(path, workers, options)
    found = {k: m for k, m in lines.items() if m.witness is not None}
    replays: dict[str, ReplayAnswer] = {}
    if found and not (cancel is not None and cancel.is_set()):
        if progress is not None:
            progress(f"replaying {counted(len(found), 'witness', 'witnesses')} in a fresh process", 1.0)
        replays = replayer.results(len(found), cancel)
    else:
        replayer.discard()

    out: list[Verdict] = []
    for v in verdicts:
        m = lines.get(v.site.key) if v.status is Status.POSSIBLE else None
        out.append(v if m is None else _after_search(v, m, replays.get(v.site.key)))
    if options.write_reproducers and isinstance(options.write_reproducers, str):
        _write_reproducers(out, options.write_reproducers)
    # --- sandbox: what the program was refused goes on the file's verdicts, never silently ---
    out, errors = with_blocked_note(out, errors, blocked_note([*results, *replayer.reports]))
    return out + errors


@dataclass
class _SiteLines:
    """What ``confirm`` does with each line a worker sends: a witness goes to its replay at
    once, and every searched site is a step of the progress."""

    by_key: dict[str, Site]  # the target sites
    total: int  # how many target verdicts
    progress: Callable[[str, float], None] | None
    replayer: WitnessReplays | None = None  # set before the workers start
    lines: dict[str, SiteReport] = field(default_factory=dict)  # kept for each replay's answer
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, msg: Message) -> None:
        if not isinstance(msg, SiteReport):
            return
        if msg.witness is not None and msg.key in self.by_key:
            assert self.replayer is not None
            self.lines[msg.key] = msg
            self.replayer.submit(msg.key, self.by_key[msg.key], msg.witness)
        if self.progress is not None:
            with self.lock:
                self.done += 1
                n = self.done
            state = "confirmed" if msg.witness is not None else "searched"
            site = self.by_key.get(msg.key)
            # Columns 1-based, as the report prints them (a key's are the core's 0-based ones).
            where = f"{site.span.start_line}:{site.span.start_col + 1} {site.op}" if site else msg.key
            self.progress(f"{state} {where} ({n}/{self.total})", n / self.total)


@dataclass
class _WorkerRun:
    """One worker subprocess searching a group of the target verdicts' sites."""

    path: str
    text: str
    group: list[Verdict]
    sites: list[Site]  # every site of the file: each run watches them all
    options: EngineOptions
    result: WorkerResult = field(default_factory=WorkerResult)

    @property
    def seconds(self) -> float:
        """The worker's wall clock: each site's searches (at most ``CLOCK_CAP`` times its budget in
        CPU seconds, the cap on a search), shrinking and start-up about one more, and room for a
        machine that gives the worker a share of a core only (``LOAD_ROOM``): a hang's last net."""
        searches = CLOCK_CAP * self.options.budget * (len(self.group) + 1)
        return self.options.timeout + LOAD_ROOM * searches + 10.0

    def run(
        self,
        on_line: Callable[[Message], None],
        cancel: threading.Event | None,
        confinement: Confinement | None,
        child: Subprocess | None = None,
    ) -> None:
        """Search this group's sites in ``child`` (already started) or in a new worker."""
        options = self.options
        request = {
            "path": self.path,
            "text": self.text,
            "targets": [to_json(v.site) for v in self.group],
            "sites": [to_json(s) for s in self.sites],
            "budget": options.budget,
            "seed": options.seed,
            "entries": list(options.entries or []),
            "script_args": dict(options.script_args),
            "project_root": options.project_root,
            "via": options.via,
            "record_timeout": options.timeout,
            "memory_mb": options.memory_mb,
            "worker_seconds": self.seconds - 5.0,
        }
        if child is None:
            child = Subprocess(WORKER_MODULE, options.memory_mb, confinement)
        self.result = child.communicate(request, self.seconds, on_line, cancel)


def _worker_errors(path: str, workers: list[_WorkerRun], options: EngineOptions) -> list[Verdict]:
    """The file's ``error`` verdicts: what the workers reported, then how a worker failed
    (crash, hang, out of memory), each message once; none from a cancelled worker."""
    errors: list[Verdict] = []
    seen: set[str] = set()
    for w in workers:
        res = w.result
        if res.cancelled:
            continue
        for e in res.errors:
            if e.message not in seen:
                seen.add(e.message)
                errors.append(file_error(path, e.message, e.line or 1, e.col, error_kind=e.kind))
        failure = _worker_failure(path, res, options, w.seconds)
        if failure is not None and failure.message not in seen:
            seen.add(failure.message)
            errors.append(failure)
    return errors


def _after_search(v: Verdict, line: SiteReport, replay: ReplayAnswer | None) -> Verdict:
    """A possible verdict after its search (the worker's ``line``) and its witness's replay:
    confirmed when a witness replayed, else still possible with what the search saw."""
    if line.witness is None:
        note = line.note
        return dataclasses.replace(
            v, reason=f"{v.reason}; dynamic: {note}" if v.reason else f"dynamic: {note}"
        )
    witness = dataclasses.replace(line.witness)  # the report stays as the worker sent it
    if replay is None or not replay.reproduced:
        why = replay.detail if replay else "the replay process did not answer"
        note = f"dynamic: a witness was found ({line.message}) but {NOT_REPLAYED}: {why}"
        return dataclasses.replace(v, reason=f"{v.reason}; {note}" if v.reason else note)
    witness.replayed = True
    message = _render_message(v.site, witness, line.message)
    # The entry's kind in words too: a probe's inputs were made up, not passed by a caller.
    entry = (
        f"probe (synthesized inputs) {witness.entry}" if witness.entry.startswith("probe:") else witness.entry
    )
    return dataclasses.replace(
        v,
        status=Status.CONFIRMED,
        witness=witness,
        message=message,
        # No seconds here: the reason is the report's, which one seed makes the same on any machine
        # (the witness's own ``seconds`` field keeps the time).
        reason=f"{message} [{line.note}, {counted(witness.iterations, 'run')}, {entry}]",
    )


def _write_reproducers(verdicts: list[Verdict], directory: str) -> None:
    from grist_lsp.dynamic.reproducer import render_reproducer, reproducer_filename

    os.makedirs(directory, exist_ok=True)
    taken: set[str] = set()
    for v in verdicts:
        if v.status is not Status.CONFIRMED or v.witness is None:
            continue
        name = reproducer_filename(v.site)
        if name in taken:
            # Two sites of one kind on one line: the column tells their reproducers apart.
            name = f"{name[:-3]}_col{v.site.span.start_col + 1}.py"
        taken.add(name)
        try:
            rep = render_reproducer(v.site, v.witness, directory, filename=name)
        except Exception:  # a reproducer we cannot render must not lose the finding
            continue
        target = os.path.join(directory, rep.filename)
        with open(target, "w", encoding="utf-8") as f:
            f.write(rep.source)
        for payload, data in rep.payloads.items():
            p = os.path.join(directory, payload)
            with open(p, "wb") as f:
                f.write(data)
            v.witness.payload = os.path.abspath(p)
        v.witness.reproducer = os.path.abspath(target)
        v.witness.reproducer_source = rep.source
