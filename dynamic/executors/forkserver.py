"""One torch start-up for all of a check's children: a fork server.

Importing torch is most of what a child costs (about a second of CPU each); a check of one file
needs several children (the search worker, the warm verify child, a worker and a replay per fix
re-check), and each one must be a fresh process: a witness is replayed where no search ran. The
server is started once per sandbox (``Confinement``: a file's, or every file's of one project in a
check, ``ForkServers``), imports torch and grist's child modules, and then only forks: every
child is a copy of a process in which no user code ever ran, made in milliseconds.

Parent side: ``ForkServer`` (``spawn`` -> ``Forked``, a ``subprocess.Popen`` look-alike that
``engine.Subprocess`` drives as it drives a Popen). Server side: ``python -m
grist_lsp.dynamic.executors.forkserver``, one request per packet on a Unix socket, each request carrying
the new child's stdin, output and result descriptors (``SCM_RIGHTS``). Each child gets a session
of its own (the engine's group kill reaches it and its own children only), dies with the server
(``PR_SET_PDEATHSIG``), and applies its own memory cap after the fork, as a fresh child does.
The server reaps its children and sends each one's exit status; when the parent goes away the
server kills its children and exits.
"""

from __future__ import annotations

import concurrent.futures
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sandbox import Confinement, Launch

SOCKET_ENV = "GRIST_FORK_SOCKET"  # the server's end of the request socket
# What the server imports before its first fork: what each of these children imports on its way
# to user code anyway, so a forked child holds nothing a fresh one would not.
ENTRY_POINTS: dict[str, str] = {
    "grist_lsp.dynamic.worker": "main",
    "grist_lsp.dynamic.verify": "_worker_main",
    "grist_lsp.dynamic.replay": "main",
}
PACKET = 1 << 16
REAP_SECONDS = 0.02  # how often the server looks for children that exited
GONE = -signal.SIGKILL  # the status of a child the server never forked or could not report


def available() -> bool:
    """Whether children can be forked from a server here (Linux: ``fork``, descriptor passing on
    a ``SOCK_SEQPACKET`` socket, a parent-death signal); elsewhere each child starts its own."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")


class ForkServerGone(RuntimeError):
    """The server exited (it could not start, or was killed): its children cannot be made."""


class Forked:
    """A child of the fork server, driven like a ``subprocess.Popen`` (the calls the engine uses)."""

    def __init__(self, server: ForkServer, ident: int, stdin: IO[bytes]) -> None:
        self._server, self._ident = server, ident
        self.stdin: IO[bytes] | None = stdin
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        """The child's pid (waits until the server has forked it; ``ProcessLookupError`` when
        the server went away first)."""
        return self._server.pid_of(self._ident)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.status_of(self._ident, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.status_of(self._ident, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("forked child", timeout or 0.0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return  # reaped: the pid may be someone else's by now
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The parent's side of one file's fork server, started under ``confinement`` with the
    environment ``environment()`` gives (``engine.worker_env``: what every child that runs user
    code gets; its children inherit it)."""

    def __init__(self, confinement: Confinement | None, environment: Callable[[], dict[str, str]]) -> None:
        self.confinement = confinement
        # Packets, not a stream: one request (and its descriptors) per message, never split.
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = environment()
        env[SOCKET_ENV] = str(theirs.fileno())
        argv = [sys.executable, "-m", __name__]
        self._launch: Launch | None = confinement.start(argv, env) if confinement is not None else None
        if self._launch is not None:
            argv, env = self._launch.argv, self._launch.env
        self._err = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._err,
            stderr=self._err,
            pass_fds=(theirs.fileno(),),
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        theirs.close()
        self._sock = ours
        self._send_lock = threading.Lock()
        self._state = threading.Condition()
        self._ids = 0
        self._pids: dict[int, int] = {}  # request id -> pid
        self._statuses: dict[int, int] = {}  # request id -> exit status (Popen's convention)
        self._gone = False
        threading.Thread(target=self._read, name="grist-forkserver", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(PACKET)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            with self._state:
                if "pid" in msg:
                    self._pids[msg["id"]] = msg["pid"]
                elif "exit" in msg:
                    self._statuses[msg["id"]] = msg["exit"]
                self._state.notify_all()
        with self._state:
            self._gone = True
            self._state.notify_all()

    def spawn(self, module: str, env: dict[str, str], stdout: IO[bytes], result_fd: int) -> Forked:
        """A new child running ``module``'s entry point: its stdin is a pipe to the returned
        ``Forked``, its stdout and stderr ``stdout``, its result pipe ``result_fd`` (the child
        sees it under the number ``GRIST_RESULT_FD`` says); ``env`` is added to the server's."""
        if module not in ENTRY_POINTS:
            raise ValueError(f"the fork server runs {sorted(ENTRY_POINTS)} only, not {module}")
        read_end, write_end = os.pipe()
        try:
            with self._send_lock:
                if self._gone:
                    raise ForkServerGone(self.failure())
                self._ids += 1
                ident = self._ids
                request = json.dumps({"id": ident, "module": module, "env": env}).encode()
                try:
                    socket.send_fds(self._sock, [request], [read_end, stdout.fileno(), result_fd])
                except OSError as exc:
                    raise ForkServerGone(self.failure()) from exc
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return Forked(self, ident, os.fdopen(write_end, "wb"))

    def pid_of(self, ident: int) -> int:
        with self._state:
            while ident not in self._pids:
                if self._gone:
                    # Never a made-up pid: the engine's group kill would take it for a group.
                    raise ProcessLookupError(self.failure())
                self._state.wait(1.0)
            return self._pids[ident]

    def status_of(self, ident: int, timeout: float | None) -> int | None:
        """The child's exit status once the server reaped it (``GONE`` if the server went away
        first), or None after ``timeout`` seconds (0: do not wait)."""
        with self._state:
            self._state.wait_for(lambda: ident in self._statuses or self._gone, timeout)
            if ident in self._statuses:
                return self._statuses[ident]
            return GONE if self._gone else None

    def failure(self) -> str:
        """Why the server went away, from its own output."""
        code = self._proc.poll()
        self._err.seek(0)
        tail = self._err.read().decode("utf-8", errors="replace").strip().splitlines()[-3:]
        return f"the fork server exited ({code}): " + (" / ".join(tail) or "no output")

    def close(self) -> None:
        """Stop the server; its children are killed with it."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self._proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._proc.wait()
        if self._launch is not None:
            self._launch.cleanup()
        self._err.close()


class ForkServers:
    """The fork servers of one check, shared by the children of all its files (or of one file, in
    the language server, which checks a file at a time): one server per confinement, so the files of one project (one confinement) import torch once between them,
    where a server per file imported it once per file checked at the same time (and every
    forked child then held its own server's copy of torch's pages).

    ``writable``: a folder the children of every server may write; each file's warm child makes
    its own folder inside it (``verify.SharedChild``). ``close`` stops the servers, after the
    last file is done."""

    def __init__(self, environment: Callable[[], dict[str, str]]) -> None:
        self.environment = environment
        self.writable = tempfile.mkdtemp(prefix="grist-check-")
        self._lock = threading.Lock()
        self._servers: list[ForkServer] = []
        # Servers start from a thread that lives until ``close``: the sandbox ties a child's life
        # to the thread that started it (a parent-death signal), and a file's threads end first.
        self._owner = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="grist-forkservers"
        )

    def server(self, confinement: Confinement | None) -> ForkServer:
        """The server of ``confinement``, started on first use (a server that went away stays:
        its callers start their children the usual way, as with a file's own server)."""
        with self._lock:
            for server in self._servers:
                if server.confinement == confinement:
                    return server
            server = self._owner.submit(ForkServer, confinement, self.environment).result()
            self._servers.append(server)
            return server

    def close(self) -> None:
        """Stop every server (their children die with them) and remove ``writable``."""
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        self._owner.shutdown(wait=False)
        shutil.rmtree(self.writable, ignore_errors=True)


# --- the server ------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In a forked child: SIGKILL when the server goes (Linux; elsewhere the server's exit path
    kills its children)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _child(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become a fresh child of ``request['module']``; never returns."""
    code: Any = 1
    try:
        sock.close()
        os.setsid()
        _die_with_parent()
        stdin, out, result = fds
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(stdin)
        os.close(out)
        os.environ.update(request["env"])
        os.environ["GRIST_RESULT_FD"] = str(result)
        module = importlib.import_module(request["module"])
        code = getattr(module, ENTRY_POINTS[request["module"]])()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - the child's output is where its parent looks
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _reap(sock: socket.socket, children: dict[int, int]) -> None:
    """Send the exit status of every child that ended (pid -> request id in ``children``)."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ident = children.pop(pid, None)
        if ident is not None:
            _send(sock, {"id": ident, "exit": os.waitstatus_to_exitcode(status)})


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        pass


def serve() -> None:
    """The server's loop: fork a child per request until the parent closes the socket."""
    sock = socket.socket(fileno=int(os.environ.pop(SOCKET_ENV)))
    import torch

    # No torch op runs here: a thread pool started before a fork would be unusable in the child.
    torch.set_num_threads(1)
    for name in ENTRY_POINTS:
        importlib.import_module(name)
    # What is imported now stays shared with every child: the collector never touches (and so
    # never copies) these objects' pages in a child.
    gc.freeze()
    children: dict[int, int] = {}
    try:
        while True:
            ready, _, _ = select.select([sock], [], [], REAP_SECONDS)
            if ready:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(sock, PACKET, 3)
                except OSError:
                    break
                if not data:
                    break
                request = json.loads(data)
                pid = os.fork()
                if pid == 0:
                    _child(sock, request, fds)
                for fd in fds:
                    os.close(fd)
                children[pid] = request["id"]
                _send(sock, {"id": request["id"], "pid": pid})
            _reap(sock, children)
    finally:
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    # No interpreter teardown: with torch loaded it takes a few tenths of a second, which the
    # parent (waiting for this exit) and so the user would wait for; nothing is left to clean up.
    os._exit(0)


if __name__ == "__main__":
    serve()
