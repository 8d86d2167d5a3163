"""The shared data model: Site, Verdict, Witness and Fix, used by every layer.

Positions: lines are 1-based, columns are 0-based *code points*. Adapters convert at the edge: the CLI's JSON/text output uses 1-based
columns, the language server converts to UTF-16 code units, the tracer converts
CPython's UTF-8 byte offsets. Nothing inside the core uses any other convention.

Every dataclass here round-trips through plain JSON (``to_json``/``from_json``)
because sites and verdicts cross process boundaries (worker subprocesses,
result caches).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload


class Status(str, enum.Enum):
    """How far a site is from being a bug, weakest claim last."""

    CONFIRMED = "confirmed"  # a witness drives it to NaN/INF
    POSSIBLE = "possible"  # not proved safe, no witness (yet)
    SAFE = "safe"  # the value-range facts prove it cannot fail
    ERROR = "error"  # the file could not be analysed or the program could not run

    def __str__(self) -> str:
        return self.value


# Order used by `--fail-on` and for sorting: a status "at or above" another.
STATUS_RANK = {Status.SAFE: 0, Status.POSSIBLE: 1, Status.ERROR: 1, Status.CONFIRMED: 2}


@dataclass(frozen=True, order=True)
class Span:
    """A source range: 1-based lines, 0-based code-point columns, end exclusive."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def contains(self, line: int, col: int) -> bool:
        if (line, col) < (self.start_line, self.start_col):
            return False
        return (line, col) < (self.end_line, self.end_col)


@dataclass(frozen=True)
class Site:
    """One candidate unsafe operation in the source.

    ``op`` is the canonical name as ``torch.overrides.resolve_name`` spells it
    (``torch.log``, ``torch.Tensor.__truediv__`` ...); ``kind`` is the catalogue
    kind (``log``, ``div`` ...); ``operand`` names the dangerous argument
    (``input``, ``divisor``, ``base`` ...). ``function`` is the dotted name of the
    enclosing function or class method, or None at module level.
    """

    file: str
    span: Span
    op: str
    kind: str
    operand: str
    text: str
    function: str | None = None
    # A "where-branch" site: its forward value is discarded downstream where it is invalid
    # (``torch.where(x > 0, torch.log(x), 0)``, ``masked_fill``, boolean indexing, ``nan_to_num``),
    # in words ("torch.where on line 5"). Its NaN/INF forward value is not the bug; the gradient
    # through the discarded branch is (0 * inf = NaN), so the engine judges it by the backward pass.
    discarded_by: str | None = None
    # "float16" when the static pass knows the operand may be half precision (a ``.half()``, a
    # ``dtype=torch.float16``, an autocast region): the region and the fixes' eps are that
    # dtype's. None: the file's dtype (float32 unless it says otherwise).
    dtype: str | None = None

    @property
    def key(self) -> str:
        """Stable identity within one version of a file (one call may be the site of two kinds)."""
        return f"{self.span.start_line}:{self.span.start_col}:{self.op}:{self.kind}"


@dataclass
class TensorValue:
    """A tensor (or scalar) as it is shown to people and stored in witnesses.

    ``values`` holds the full nested list when the tensor is small (see
    ``INLINE_LIMIT`` in dynamic/witness.py), else None and ``summary`` says
    min/max/mean; ``file`` then names a ``.pt`` payload beside the reproducer.
    """

    shape: list[int]
    dtype: str
    values: Any = None
    summary: dict[str, float] = field(default_factory=dict)
    file: str | None = None


FACTORY_KEY = re.compile(r"(.+?):(\d+):([\w.]+)#(\d+)")  # "file.py:line:torch.randn#occurrence"
SHOWN_INPUTS = 6  # inputs a witness's text names; the JSON witness and the reproducer hold all


def is_factory_key(key: str) -> bool:
    """Whether an input key names a tensor made inside the program (``dynamic/tracing.py``, ``Tracer._input_key``),
    as opposed to an argument the entry passes by name."""
    return FACTORY_KEY.fullmatch(key) is not None


@dataclass
class Witness:
    """Proof that a site reaches NaN/INF: how to enter the program and with what."""

    entry: str  # e.g. "script:train.py", "entry:models.py:make", "test:tests/test_x.py::test_y", "probe:model.py:VAE"
    inputs: dict[str, TensorValue]  # input name -> value that triggers the bug
    weights_moved: dict[str, float]  # parameter name -> max |delta| from its value at entry
    operand: TensorValue | None  # the dangerous operand at the failing evaluation
    result: str  # "nan", "inf", "-inf"
    phase: str = "forward"  # "forward" or "backward" (NaN/INF first seen in a gradient)
    iterations: int = 0
    seconds: float = 0.0
    seed: int = 0
    input_bound: float | None = None  # |x| bound the search respected
    beyond_examples: float | None = None  # how far past the example inputs' range (x times)
    replayed: bool = False  # reproduced in a fresh process
    reproducer: str | None = None  # path of the emitted pytest file, when written
    reproducer_source: str | None = None  # the pytest file's text, when generated
    payload: str | None = None  # path of the .pt file holding large tensors, if any
    # Parameter moves replay needs: "param#<k>" (k-th parameter in order of first use in the run) -> delta
    # added to it; weights_moved gives the same moves by readable name.
    weight_deltas: dict[str, TensorValue] = field(default_factory=dict)
    # Training steps the program took before the failing one, when the witness is the state a
    # training run reached (GRIST's own setting: ``dynamic/training.py``); weight_values then
    # hold the weights as the program's own optimizer left them, bit for bit ("param#<k>" ->
    # value, written into the parameter at its first use): a value re-made from a delta added to
    # the weight at entry loses the last bits (-0.0, a subnormal, the float32 next to a root).
    steps: int | None = None
    weight_values: dict[str, TensorValue] = field(default_factory=dict)
    # The training step whose evaluation of the site the witness breaks (and a replay judges): a
    # search that let the program's own training run this many steps first, because the inputs'
    # gradient was exactly 0 before (weights initialised to zero). 0: the first evaluation.
    target_step: int = 0
    # Training steps (backward calls) the failing run took before it reached the site. A replay of
    # a training loop gives up a few steps after it: a fixed program whose site is gone, or never
    # fails, would otherwise train until its own loop ends (``while True``: never).
    at_step: int = 0
    # Input key -> the name people read (the variable that held it), where the key is not one.
    names: dict[str, str] = field(default_factory=dict)
    # The command-line arguments a script entry ran with (``[tool.grist] script-args``,
    # ``--script-args``): replays and reproducers pass them again.
    argv: list[str] = field(default_factory=list)

    def name_of(self, key: str) -> str:
        """The name people read for input ``key``."""
        return self.names.get(key, key)

    def input_words(self, word: Callable[[str, TensorValue], str], limit: int = SHOWN_INPUTS) -> list[str]:
        """``word(name, value)`` of the first ``limit`` inputs, then "N more": a DataLoader's batch
        can be dozens of item tensors, which a line of text cannot carry."""
        items = list(self.inputs.items())
        more = len(items) - limit
        return [word(self.name_of(k), v) for k, v in items[:limit]] + ([f"{more} more"] if more > 0 else [])


@dataclass(frozen=True)
class TextEdit:
    span: Span
    new_text: str


@dataclass
class Fix:
    """A rewrite that removes the bug. ``verified`` only after the engine re-checked it."""

    title: str
    edits: list[TextEdit]
    verified: bool = False
    note: str = ""  # why it is (not) verified, in words


@dataclass(frozen=True)
class OperandRange:
    """The interval the static pass proved for a site's dangerous operand.

    An unbounded side is None, not +-inf: verdicts cross to editors as JSON, where Infinity is no
    number (a client that parses strictly drops the whole message).
    """

    lo: float | None
    hi: float | None
    nonzero: bool = False  # 0 itself is excluded even when lo <= 0 <= hi

    @property
    def nonnegative(self) -> bool:
        return self.lo is not None and self.lo >= 0.0


@dataclass
class Verdict:
    """What we know about one site (or, for ``error``, about one file)."""

    site: Site
    status: Status
    reason: str = ""
    witness: Witness | None = None
    fixes: list[Fix] = field(default_factory=list)
    message: str = ""
    # What ``reason`` says of the operand's range, as data (fixes read it; words are for people).
    operand_range: OperandRange | None = None
    # For ``error`` verdicts: what kept the file from being checked, one of ``ERROR_KINDS``.
    error_kind: str | None = None


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun in the number it takes: "1 site", "2 sites", "1 fix"/"2 fixes"
    with ``plural``. Every count a user reads goes through here, so none says "1 sites"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


# Why a file could not be checked, as the JSON finding's ``error_kind`` says it (a stable list:
# tools read it; ``dynamic/failures.py`` decides which applies).
ERROR_KINDS = (
    "missing-data",  # a data file the program reads is absent
    "needs-gpu",  # the program insists on CUDA
    "needs-distributed",  # torch.distributed: a process group, its environment
    "needs-network",  # a download (the check runs without network)
    "needs-arguments",  # required command-line arguments
    "import-error",  # a module the program imports is not installed (or fails to import)
    "timeout",  # it did not reach its checked operations in time
    "memory",  # out of memory
    "crash",  # the process died (a signal, a native crash)
    "other",  # any other error, a file that cannot be read or parsed included
)


# What a possible verdict's reason says when its witness did not replay in a fresh process
# (``dynamic/engine.py``): often a replay that timed out on a busy machine, so the result cache
# does not keep such an answer (``cache.cacheable``).
NOT_REPLAYED = "did not replay in a fresh process"


def file_error(
    path: str, message: str, line: int = 1, col: int = 0, kind: str = "error", error_kind: str = "other"
) -> Verdict:
    """A verdict for a whole file that could not be analysed or run (``error_kind``: why, one of
    ``ERROR_KINDS``)."""
    site = Site(file=path, span=Span(line, col, line, col), op="", kind=kind, operand="", text="")
    return Verdict(site=site, status=Status.ERROR, reason=message, message=message, error_kind=error_kind)


# --- JSON round trip -------------------------------------------------------


def to_json(obj: Any) -> Any:
    """Plain JSON data for any model object (enums become their values)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def finite_json(value: Any) -> Any:
    """JSON data with every NaN/INF number as None: JSON has no such numbers (Python would write
    ``Infinity``), and strict readers (VS Code's client, ``jq``) refuse the whole document."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def _tensor_value(d: dict | None) -> TensorValue | None:
    return None if d is None else TensorValue(**d)


def site_from_json(d: dict) -> Site:
    return Site(**{**d, "span": Span(**d["span"])})


@overload
def witness_from_json(d: dict) -> Witness: ...
@overload
def witness_from_json(d: None) -> None: ...
@overload
def witness_from_json(d: dict | None) -> Witness | None: ...


def witness_from_json(d: dict | None) -> Witness | None:
    """A witness from its JSON form; None for a verdict's absent witness (JSON null). Keys this
    version does not know are ignored: a reproducer written by a later grist-lsp still loads."""
    if d is None:
        return None
    known = {f.name for f in dataclasses.fields(Witness)}
    return Witness(
        **{
            **{k: v for k, v in d.items() if k in known},
            "inputs": {k: TensorValue(**v) for k, v in d["inputs"].items()},
            "operand": _tensor_value(d.get("operand")),
            "weight_deltas": {k: TensorValue(**v) for k, v in d.get("weight_deltas", {}).items()},
            "weight_values": {k: TensorValue(**v) for k, v in d.get("weight_values", {}).items()},
        }
    )


def fix_from_json(d: dict) -> Fix:
    edits = [TextEdit(span=Span(**e["span"]), new_text=e["new_text"]) for e in d["edits"]]
    return Fix(**{**d, "edits": edits})


def verdict_from_json(d: dict) -> Verdict:
    return Verdict(
        site=site_from_json(d["site"]),
        status=Status(d["status"]),
        reason=d.get("reason", ""),
        witness=witness_from_json(d.get("witness")),
        fixes=[fix_from_json(f) for f in d.get("fixes", [])],
        message=d.get("message", ""),
        operand_range=OperandRange(**d["operand_range"]) if d.get("operand_range") else None,
        error_kind=d.get("error_kind"),
    )
