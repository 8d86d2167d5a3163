"""Why the user's program could not be checked: an exception (or a dead worker) as one line of
words and a stable ``error_kind`` (``model.ERROR_KINDS``).

A project's scripts are run as they stand, and many cannot run here: they read data files that
are not in the checkout, insist on a GPU or a process group, download weights (the sandbox has no
network) or need command-line arguments. Each of those ends as one line that says what was
missing and how to give it (``--entry``, ``[tool.grist] script-args``), never a traceback. The
kind is decided from the exception, its causes and where it was raised (torch's ``cuda`` or
``distributed`` packages, ``argparse``), not from the program's names.
"""

from __future__ import annotations

import ast
import errno
import importlib.machinery
import os
import re
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType

from grist_lsp.analyzer.parsing import UNPARSABLE, parse

ENTRY_HINT = "give an entry with --entry file.py:function"
DISTRIBUTED_HINT = (
    f"it is checked in one process without a process group: {ENTRY_HINT} that builds the model in "
    "one process, or turn distribution off with [tool.grist] script-args"
)
_DIST_ENV = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
_DIST_WORDS = re.compile(r"process group|init_process_group|torch\.distributed|\bnccl\b|rendezvous", re.I)
_GPU_WORDS = re.compile(r"\bcuda\b|\bgpus?\b|nvidia", re.I)
_NETWORK_CLASSES = frozenset(
    {"URLError", "HTTPError", "gaierror", "herror", "ConnectionError", "Timeout", "ProxyError", "SSLError"}
)
_NETWORK_WORDS = re.compile(
    r"name resolution|name or service not known|network is unreachable|couldn't connect|"
    r"connection refused|failed to establish a new connection|blocked by the grist-lsp sandbox: connect",
    re.I,
)
_MISSING_WORDS = re.compile(
    r"no such file or directory|dataset not found|couldn't find any class folder|num_samples=0|"
    r"file not found|does not exist",
    re.I,
)
_MEMORY_WORDS = re.compile(r"can't allocate memory|not enough memory|out of memory", re.I)


class RunTimeout(BaseException):
    """Raised by the interval timer inside a run of the user's program that took too long."""


@dataclass(frozen=True)
class Failure:
    """One line for an error verdict: the words, the target file's line, the ``error_kind``."""

    message: str
    line: int
    kind: str


def _innermost(exc: BaseException, name: Callable[[str], str | None]) -> tuple[str, int] | None:
    """The innermost traceback frame whose file ``name`` gives a name for: (that name, line)."""
    loc = None
    for fs in traceback.extract_tb(exc.__traceback__):
        shown = name(fs.filename)
        if shown is not None:
            loc = (shown, fs.lineno or 1)
    return loc


def user_location(exc: BaseException, files: set[str]) -> tuple[str, int] | None:
    """The innermost traceback frame in one of the user's files: (file, line)."""
    return _innermost(exc, lambda f: f if os.path.abspath(f) in files else None)


def _project_location(exc: BaseException, root: str) -> tuple[str, int] | None:
    """The innermost traceback frame in a file of the project under ``root`` (installed
    packages left out), its path relative to the root: (file, line)."""
    top = os.path.abspath(root) + os.sep

    def relative(f: str) -> str | None:
        path = os.path.abspath(f)
        return os.path.relpath(path, top) if path.startswith(top) and "site-packages" not in path else None

    return _innermost(exc, relative)


def waited_in_distributed(stderr: str) -> bool:
    """Whether a worker's faulthandler dump shows it stopped inside ``torch.distributed`` (a
    process group waiting, natively, for ranks that never come)."""
    return re.search(r'File "[^"]*/torch/distributed/', stderr) is not None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then what caused it (``raise ... from``, or raised while handling)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _frames(tb: TracebackType | None) -> Iterator[TracebackType]:
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _raised_in(exc: BaseException, *parts: str) -> bool:
    """Whether a frame of the exception's traceback is in a file whose path holds one of ``parts``."""
    return any(
        any(part in tb.tb_frame.f_code.co_filename.replace(os.sep, "/") for part in parts)
        for tb in _frames(exc.__traceback__)
    )


def argparse_message(exc: BaseException) -> str | None:
    """What ``argparse`` said before it exited (``the following arguments are required: --epochs``):
    the ``message`` of its ``error`` frame, which is still on the traceback."""
    for tb in _frames(exc.__traceback__):
        code = tb.tb_frame.f_code
        if code.co_name == "error" and code.co_filename.endswith("argparse.py"):
            message = tb.tb_frame.f_locals.get("message")
            if isinstance(message, str):
                return message
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def _kind_of_one(exc: BaseException) -> str | None:
    """The kind one exception of a chain shows by itself, or None."""
    first = _first_line(exc)
    classes = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, RunTimeout):
        # Stopped while waiting for the other ranks of a process group: that is what it lacked.
        return "needs-distributed" if _raised_in(exc, "/torch/distributed/") else "timeout"
    if isinstance(exc, MemoryError) or _MEMORY_WORDS.search(first):
        return "memory"
    if isinstance(exc, SystemExit):
        usage = isinstance(exc.code, str) and "usage" in exc.code.lower()
        if argparse_message(exc) is not None or usage or _raised_in(exc, "/click/", "/typer/", "/fire/"):
            return "needs-arguments"
        return None
    if isinstance(exc, IndexError) and any(
        "sys.argv" in (fs.line or "") for fs in traceback.extract_tb(exc.__traceback__)
    ):
        return "needs-arguments"
    if isinstance(exc, KeyError) and exc.args and exc.args[0] in _DIST_ENV:
        return "needs-distributed"
    if _raised_in(exc, "/torch/distributed/", "/torch/nn/parallel/distributed.py") or _DIST_WORDS.search(
        first
    ):
        return "needs-distributed"
    if _raised_in(exc, "/torch/cuda/") or _GPU_WORDS.search(first):
        return "needs-gpu"
    if classes & _NETWORK_CLASSES or _NETWORK_WORDS.search(first):
        return "needs-network"
    if isinstance(exc, ImportError):
        return "import-error"
    if isinstance(exc, FileNotFoundError) or (isinstance(exc, OSError) and exc.errno == errno.ENOENT):
        return "missing-data"
    if _MISSING_WORDS.search(first):
        return "missing-data"
    return None


def error_kind(exc: BaseException) -> str:
    """The ``error_kind`` of an exception that kept the program from its checked operations: the
    first kind its chain shows (a wrapped download error is a network one), else
    ``import-error`` when it was raised by an ``import`` (a package writing its cache folder at
    import), else ``other``."""
    for one in _chain(exc):
        kind = _kind_of_one(one)
        if kind is not None:
            return kind
    return "import-error" if raised_by_import(exc) else "other"


def raised_by_import(exc: BaseException) -> bool:
    """Whether an ``import`` statement is on the exception's way up: a frame above the innermost
    one was executing ``import ...`` or ``from ... import``. Python hides its own import
    machinery's frames, so the importing line is what shows it."""
    frames = traceback.extract_tb(exc.__traceback__)[:-1]
    return any((fs.line or "").lstrip().startswith(("import ", "from ")) for fs in frames)


def _missing_file(exc: BaseException) -> str:
    """The file name a missing-data error names, for the message."""
    for one in _chain(exc):
        filename = getattr(one, "filename", None)
        if isinstance(filename, str) and filename:
            return f" {filename}"
    return ""


def _required_arguments(message: str) -> list[str]:
    """The flags argparse said are required, as the example of ``script-args`` shows them."""
    _, sep, names = message.partition("arguments are required:")
    if not sep:
        return []
    return [n.strip().split("/")[0] for n in names.split(",") if n.strip()]


def script_args_hint(script: str | None, root: str | None, message: str = "") -> str:
    """How to give a script its arguments, in the spelling of ``[tool.grist] script-args`` and
    ``--script-args`` for this script (the flags argparse asked for, when it said which)."""
    if script is None:
        return ENTRY_HINT
    rel = os.path.relpath(script, root) if root else os.path.basename(script)
    rel = rel.replace(os.sep, "/") if not rel.startswith("..") else os.path.abspath(script)
    flags = _required_arguments(message) or ["ARGUMENTS"]  # shown as "...": what it takes is unknown
    toml = ", ".join(f'"{f}", "..."' if f.startswith("-") else '"..."' for f in flags)
    cli = " ".join(f"{f} ..." if f.startswith("-") else "..." for f in flags)
    return (
        f'give them with [tool.grist] script-args = {{"{rel}" = [{toml}]}} '
        f"or --script-args '{rel}={cli}', or {ENTRY_HINT}"
    )


def describe_failure(
    exc: BaseException,
    files: set[str],
    label: str,
    memory_mb: int | None,
    script: str | None = None,
    root: str | None = None,
) -> Failure:
    """Words for an exception in the user's program, the target-file line to attach them to, and
    its kind. ``script``: the file run as ``__main__`` (it is the one that takes arguments)."""
    loc = user_location(exc, files)
    line = loc[1] if loc else 1
    first = _first_line(exc)
    raised = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    kind = error_kind(exc)
    if kind == "import-error" and root:
        # the module that failed is often none of the entry's files: a package it imports
        loc = _project_location(exc, root) or loc
    where = f" at {loc[0]}:{loc[1]}" if loc else ""
    if isinstance(exc, SyntaxError):
        return Failure(
            f"the program does not compile: {exc.msg} at {exc.filename}:{exc.lineno}",
            exc.lineno or 1,
            "other",
        )
    if kind == "timeout":
        text = (
            f"the program did not reach the checked operations in time ({label}); it was still running{where} "
            f"(a hang or a long loop?): {ENTRY_HINT} or raise the timeout"
        )
    elif kind == "memory":
        limit = f" (limit {memory_mb} MB)" if memory_mb else ""
        text = f"the program ran out of memory{limit}{where} ({label}): reduce the sizes it allocates"
    elif kind == "needs-arguments":
        said = argparse_message(exc) or (exc.code if isinstance(exc, SystemExit) else first)
        text = (
            f"the program needs command-line arguments ({said}){where} ({label}); it was run with none "
            f"of them: {script_args_hint(script, root, str(said))}"
        )
    elif kind == "missing-data":
        text = (
            f"the program needs the data file{_missing_file(exc)}, which is absent ({raised}){where} ({label}): "
            f"put it there, or (a script taking its path as an argument) give another with [tool.grist] "
            f"script-args, or {ENTRY_HINT} that makes small inputs"
        )
    elif kind == "needs-gpu":
        text = (
            f"the program needs a GPU ({raised}){where} ({label}); it is checked on the CPU: "
            f"{ENTRY_HINT} that builds the model on the CPU"
        )
    elif kind == "needs-distributed":
        text = f"the program needs torch.distributed ({raised}){where} ({label}); {DISTRIBUTED_HINT}"
    elif kind == "needs-network":
        text = (
            f"the program needs the network ({raised}){where} ({label}); it is checked without one: fetch "
            f"what it downloads into the project beforehand, or {ENTRY_HINT}"
        )
    elif kind == "import-error":
        fix = (
            "install the missing module" if isinstance(exc, ImportError) else "fix what it does when imported"
        )
        text = f"the program cannot be imported: {raised}{where} ({label}): {fix} or {ENTRY_HINT}"
    elif isinstance(exc, NameError) and exc.name in KERNEL_ONLY:
        text = (
            f"the notebook needs a Jupyter kernel{where}: {exc.name}() exists only in one ({label}); "
            "write that line as a magic (%...), which the check leaves out, or guard it with "
            "`if 'get_ipython' in globals()`"
        )
    elif isinstance(exc, SystemExit):
        text = (
            f"the program exited with status {exc.code}{where} ({label}) before reaching the checked "
            f"operations: {ENTRY_HINT}"
        )
    else:
        text = (
            f"the program raised {raised}{where} ({label}) before reaching the checked "
            f"operations: fix the error or {ENTRY_HINT}"
        )
    return Failure(text, line, kind)


# What only a Jupyter kernel defines, which a notebook run as a script cannot have.
KERNEL_ONLY = frozenset({"get_ipython"})


# The note a file whose program imports an absent torchvision carries (``absent_torchvision``):
# one part of a reason, whose parts are joined by "; ", so it holds none itself.
SYNTHETIC_DATA = (
    "torchvision is not installed here: its datasets were stood in by synthetic images of their "
    "real shape, pixel range and classes (witnesses are inputs the search built, not real images: "
    "install torchvision and the data to run on those)"
)


def stand_in_note(text: str) -> str | None:
    """What to tell a user whose program ``text`` imports torchvision, when it is absent here:
    its data was made up (``absent_torchvision``), so the witness is not a real image."""
    if "torchvision" not in text or importlib.machinery.PathFinder.find_spec("torchvision") is not None:
        return None
    try:
        tree = parse(text)
    except UNPARSABLE:
        return None
    imports = any(
        (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "torchvision" for a in n.names))
        or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torchvision")
        for n in ast.walk(tree)
    )
    return SYNTHETIC_DATA if imports else None
