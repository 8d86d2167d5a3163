"""The lines a child process writes on its result pipe (``GRIST_RESULT_FD``), as dataclasses.

Every child (worker, replay child, warm verify child) says ``Ready`` once torch is imported. A
worker then sends one ``SiteReport`` per target site, a ``RunError`` for a program that could not
run, and ``Done`` (or a ``BadEntry`` and ``Done``, for an explicit entry that cannot be used);
the replay child answers each witness with a ``ReplayAnswer`` and the warm verify child each
task with a ``TaskResult``; the sandbox's audit hook adds a ``Blocked`` line for each action it refused. Each message encodes itself
(``line``) and ``decode`` reads any of them back, so both ends share one definition.

The other way, the warm verify child reads one task a line on its stdin: a ``ReplayTask`` or a
``RunTask`` (``task_line`` / ``decode_task``), each answered by a ``TaskResult`` with its id.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from grist_lsp.model import Site, Witness, site_from_json, to_json, witness_from_json


@dataclass(frozen=True)
class Ready:
    """The child imported torch; its pid is for a stack dump on a timeout (under bubblewrap the
    parent's own child is bwrap)."""

    pid: int
    TYPE: ClassVar[str] = "ready"


@dataclass(frozen=True)
class SiteReport:
    """A worker's answer for one target site: a witness when its search broke the site."""

    key: str
    witness: Witness | None
    entry: str | None  # the entry that reached the site, if any did
    note: str = ""  # how the witness was found, or why none was
    message: str = ""  # the finding in words, for a witness
    TYPE: ClassVar[str] = "site"


@dataclass(frozen=True)
class ReplayAnswer:
    """A witness replayed in a fresh process: did the site fail again?"""

    key: str
    reproduced: bool
    detail: str
    result: str = ""  # "nan" / "inf" / "-inf" / "finite" / "not-reached"
    TYPE: ClassVar[str] = "replayed"


@dataclass(frozen=True)
class TaskResult:
    """The warm verify child's answer to one task (``verify.py``: a replay or a run)."""

    id: int
    result: dict[str, Any]
    TYPE: ClassVar[str] = "result"


@dataclass(frozen=True)
class RunError:
    """The program could not run (import error, crash at a line of the user's code)."""

    message: str
    line: int = 1
    col: int = 0
    kind: str = "other"  # the verdict's error_kind (``model.ERROR_KINDS``, ``failures.py``)
    TYPE: ClassVar[str] = "error"


@dataclass(frozen=True)
class BadEntry:
    """An explicit entry (``--entry`` / ``entries``) that cannot be used: no such function, or
    it returned something other than ``(callable, args[, kwargs])``. A usage error, not a
    finding: the parent stops the check with it (exit 2) instead of falling back to a probe."""

    message: str
    TYPE: ClassVar[str] = "bad_entry"


@dataclass(frozen=True)
class Blocked:
    """An action the sandbox refused the program (written by the audit hook, ``sandbox.py``)."""

    action: str
    path: str
    TYPE: ClassVar[str] = "blocked"


@dataclass(frozen=True)
class Done:
    """The worker answered every target."""

    TYPE: ClassVar[str] = "done"


Message = Ready | SiteReport | ReplayAnswer | TaskResult | RunError | BadEntry | Blocked | Done
_BY_TYPE: dict[str, type[Any]] = {
    c.TYPE: c for c in (Ready, SiteReport, ReplayAnswer, TaskResult, RunError, BadEntry, Blocked, Done)
}


def line(msg: Message) -> str:
    """The JSON line for ``msg`` (with its newline)."""
    return json.dumps({"type": msg.TYPE, **to_json(msg)}) + "\n"


def decode(text: str) -> Message | None:
    """The message on one result line; None for a line that is none (a torn write, a stray print)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    cls = _BY_TYPE.get(data.pop("type", None)) if isinstance(data, dict) else None
    if cls is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in data.items() if k in names}
    if cls is SiteReport:
        fields["witness"] = witness_from_json(fields.get("witness"))
    try:
        return cls(**fields)
    except TypeError:  # a field missing: not one of ours
        return None


# --- tasks for the warm verify child (stdin) ------------------------------------------------


@dataclass(frozen=True)
class ReplayTask:
    """Replay ``witness`` against ``text`` and judge ``site`` (``replay.replay``)."""

    path: str
    text: str
    site: Site
    witness: Witness
    TASK: ClassVar[str] = "replay"


@dataclass(frozen=True)
class RunTask:
    """Run ``entry`` once on the program's own inputs and save what it returns to ``out``;
    with ``compare_with``, also say whether it equals what an earlier run saved there."""

    path: str
    text: str
    entry: str
    seed: int
    out: str
    compare_with: str | None = None
    rtol: float = 1e-4  # how far the values may move (verify.output_rtol)
    argv: list[str] = dataclasses.field(default_factory=list)  # a script's arguments (``Witness.argv``)
    TASK: ClassVar[str] = "run"


Task = ReplayTask | RunTask


def task_line(task: Task, ident: int) -> str:
    """The JSON line that asks the child for ``task`` (answered with ``ident``)."""
    return json.dumps({"task": task.TASK, "id": ident, **to_json(task)}) + "\n"


def decode_task(text: str) -> tuple[int, Task]:
    """The id and task on one stdin line (raises ValueError for a line that is none)."""
    data = json.loads(text)
    ident = int(data.pop("id", 0) or 0)
    kind = data.pop("task", None)
    if kind == ReplayTask.TASK:
        return ident, ReplayTask(
            data["path"], data["text"], site_from_json(data["site"]), witness_from_json(data["witness"])
        )
    if kind == RunTask.TASK:
        return ident, RunTask(**data)
    raise ValueError(f"not a task: {kind!r}")
