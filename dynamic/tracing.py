"""Sees every torch call a user program makes and maps it to the static Sites.

Owns the ``TorchFunctionMode`` (``Tracer``) used by the search, the recording
run and replay. For each torch function, Tensor method or operator it:

* substitutes external inputs: tensors made by factories (``randn``,
  ``tensor``, ``from_numpy`` ...) called directly from user code, and tensors
  that show up as operands without ever having been produced under the mode,
  keyed by ``<file name>:<line>:<op>#<occurrence>``;
* substitutes parameters by ``parameter + delta`` when the search moves weights;
* maps catalogue ops to Sites by the position of the innermost frame in the
  target file (``f_lasti`` -> ``co_positions()``, UTF-8 byte columns converted
  to code points), and by kind;
* applies the oracle at a site (operands finite, output not; for kinds whose
  Region ``inf_operands``, operands may hold those infinities and only a NaN
  output counts; for kinds whose Region ``raises``, the op raising
  ``torch.linalg.LinAlgError`` from finite operands is the failure) and, for the search's target site, stops the run by raising
  ``TargetReached``;
* judges the sites of gradient kinds (Region ``gradient``: the vectors of eigh/svd, whose
  derivative divides by eigenvalue gaps) by the op's own backward pass: found only when the
  forward value is finite, the op's gradient for a unit gradient on every output is not, and the
  matrix depends on a tensor the program differentiates (a weight, a tensor it made trainable;
  not an input the search or the training run steers);
* judges where-branch sites (``Site.discarded_by``: the program discards the op's value where it
  is invalid) by the gradient instead: a NaN/INF forward value there is thrown away and is no
  finding. Their objective is the operand's distance to the edge of the invalid region (0 for
  log), the run goes on to the op that discards the value (``torch.where``, ``masked_fill``,
  indexing, ``nan_to_num``), and from that op's output a backward pass decides: found only when
  this op turns a finite upstream gradient into a non-finite one at an entry that is invalid or
  on the edge, and that NaN/INF reaches a tensor the program itself differentiates (a weight, a
  tensor it made trainable). A program that differentiates nothing there cannot hit it.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import resolve_name
from torch.utils.weak import WeakTensorKeyDictionary

from grist_lsp.analyzer.catalogue import KINDS, Op, lookup
from grist_lsp.model import Site

from .reproducer_runtime import RunHere, on_cpu

# What torch.linalg raises for a matrix it cannot factor (documented as torch.linalg.LinAlgError;
# torch's stubs do not re-export the name, hence the one ignore).
LinAlgError: type[Exception] = torch.linalg.LinAlgError  # pyright: ignore[reportPrivateImportUsage]
# Factories whose results, when called directly from user code, are program inputs.
RANDOM_FACTORIES = frozenset(
    {
        "torch.randn",
        "torch.rand",
        "torch.randn_like",
        "torch.rand_like",
        "torch.normal",
        "torch.randint",
        "torch.randint_like",
        "torch.Tensor.normal_",
        "torch.Tensor.uniform_",
        # Samplers: what they draw is data, whatever the rates they were given.
        "torch.poisson",
        "torch.bernoulli",
        "torch.multinomial",
    }
)
# Data constructors: inputs only when they hold more than one element, so that
# literal constants such as ``torch.tensor(1e-8)`` stay what the programmer wrote.
DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor.new_tensor"})
# Constant fills: inputs only when a test or an entry file makes them (``model({"weight":
# torch.ones(5)})`` stands for data there); in the checked file itself they are the
# programmer's constants (``torch.full_like(p, 1e-8)``, a buffer of ones) and never move.
CONSTANT_FACTORIES = frozenset(
    {"torch.ones", "torch.zeros", "torch.full", "torch.ones_like", "torch.zeros_like", "torch.full_like"}
)
# Calls that make a tensor trainable (see ``Tracer._make_trainable``).
_MAKE_TRAINABLE = frozenset({"torch.Tensor.requires_grad_", "torch.Tensor.requires_grad.__set__"})
# In-place factories cannot be swapped for another tensor: the caller keeps the old one.
_INPLACE_FACTORIES = frozenset({"torch.Tensor.normal_", "torch.Tensor.uniform_"})
# Transposes spelled as properties: their getters see the weight itself, so a moved weight is
# substituted there too (``Tracer._transposed_operand``; other getters, ``.grad`` and ``.data``,
# must act on the real tensor).
_TRANSPOSES = frozenset(
    {"torch.Tensor.T.__get__", "torch.Tensor.mT.__get__", "torch.Tensor.H.__get__", "torch.Tensor.mH.__get__"}
)
# Python's operators and indexing (``w ** 2``, ``1 - w``, ``w[0]``) read their operands and make a
# new tensor, as ``torch.pow`` does, so they must see moved weights; their names end in "_" like
# in-place methods, which must not. Listed, not told apart by shape: the in-place forms
# (``__ipow__``, ``__setitem__``) and setters (``p.data = ...``, how ``module.half()`` converts
# its weights) write to their first operand, and on a moved copy the write would be lost.
_OPERATORS = frozenset(
    f"torch.Tensor.__{r}{op}__"
    for op in (
        "add",
        "sub",
        "mul",
        "matmul",
        "truediv",
        "div",
        "floordiv",
        "mod",
        "pow",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
    )
    for r in ("", "r")
) | frozenset(
    f"torch.Tensor.__{op}__"
    for op in ("neg", "pos", "abs", "invert", "getitem", "eq", "ne", "lt", "le", "gt", "ge")
)
# The end of a training step, as the mode sees it.
BACKWARD = frozenset({"torch.Tensor.backward", "torch.autograd.backward"})
# Tensors made at one place of the program that are inputs (recorded, substituted, steered): the
# later ones pass through as the program's own.
MAX_OCCURRENCES = 64
# Training steps a run aimed at its target's evaluation at step T goes past T without meeting it.
TARGET_STEP_SLACK = 16
# In a loop that never calls ``backward`` (an evaluation loop), how often a run meets one site
# again without reaching a new one before it stops (``TracerConfig.stop_after_rounds``): an endless
# loop whose other sites wait for a NaN would otherwise run each recording, search and shrinking
# run to the clock.
LOOP_ROUNDS = 200
# How many torch calls a run of another script that imports the checked module makes without
# reaching a new site of the module before it stops (``TracerConfig.quiet_calls``): the script's
# endless loop meets none of the module's sites, so it has no round to count, and its sites behind
# the loop would cost the whole recording timeout. (A script's own endless loop is a hang to report.)
QUIET_CALLS = 20_000
# Ops that may discard a where-branch site's value (see ``analyzer/where_branch.py``): the backward
# pass of the where-branch oracle starts at the first of them whose output depends on the site.
DISCARDING = frozenset(
    {
        "torch.where",
        "torch.Tensor.where",
        "torch.masked_fill",
        "torch.Tensor.masked_fill",
        "torch.Tensor.masked_fill_",
        "torch.Tensor.__getitem__",
        "torch.Tensor.__setitem__",
        "torch.nan_to_num",
        "torch.Tensor.nan_to_num",
        "torch.Tensor.nan_to_num_",
    }
)

_TORCH_DIR = os.path.normcase(os.path.dirname(torch.__file__))
_OWN_DIR = os.path.normcase(os.path.dirname(__file__))
_DATA_LOADING = os.path.join(_TORCH_DIR, "utils", "data")  # a DataLoader's collate stacks its items
# Frames between a torch call and its Python caller that are not the caller.
_DISPATCH_FILES = (
    os.path.join(_TORCH_DIR, "overrides.py"),
    os.path.join(_TORCH_DIR, "utils", "_device.py"),
    _OWN_DIR,
)


# Ops whose cost is their output's elements times the length they contract over.
_CONTRACTING = frozenset(
    {
        "torch.nn.functional.linear",
        "torch.matmul",
        "torch.Tensor.matmul",
        "torch.Tensor.__matmul__",
        "torch.mm",
        "torch.Tensor.mm",
        "torch.bmm",
        "torch.Tensor.bmm",
        "torch.conv1d",
        "torch.conv2d",
        "torch.conv3d",
        "torch.nn.functional.conv1d",
        "torch.nn.functional.conv2d",
        "torch.nn.functional.conv3d",
        "torch.nn.functional.conv_transpose2d",
    }
)


def _work(name: str, args: tuple, out: Any) -> int:
    """A torch call's cost in multiply-adds, roughly: its output's elements, times the contracted
    length for products and convolutions (a convolution's: its weight's elements per filter)."""
    if not isinstance(out, torch.Tensor):
        return 0
    n = out.numel()
    if name in _CONTRACTING and len(args) >= 2 and isinstance(args[1], torch.Tensor) and args[1].dim():
        w = args[1]
        if name.split(".")[-1].startswith("conv"):
            n *= w[0].numel()
        else:  # linear's weight is (out, in); a product's right factor is (..., k, m) or (k,)
            n *= w.shape[-1] if "linear" in name or w.dim() == 1 else w.shape[-2]
    return n


class TargetReached(BaseException):
    """Raised from inside the mode to stop the user's program at the target site.

    A BaseException so that the user's own ``except Exception`` does not swallow it.
    """

    def __init__(self, outcome: SiteOutcome) -> None:
        super().__init__("target site reached")
        self.outcome = outcome


class RunStopped(BaseException):
    """Raised from inside the mode when the engine, not the program, ends a run on purpose."""


class AllSitesReached(RunStopped):
    """Raised in recording runs once every watched site has been evaluated."""


@dataclass
class SiteOutcome:
    """What happened at one evaluation of a site."""

    site: Site
    found: bool  # operands finite and output (or, phase backward, local gradient) not
    result: str  # "nan" / "inf" / "-inf" / "finite" / "upstream" (an operand was already non-finite)
    phase: str = "forward"
    operand: torch.Tensor | None = None  # detached copy of the dangerous operand
    bad_value: float | None = None  # the operand element that produced the first non-finite output
    distance: torch.Tensor | None = None  # objective, still attached to the graph
    position: tuple[int, int, int, int] | None = None
    step: int = 0  # training steps (backward calls) the run had taken when it was evaluated
    # The op raised this error from finite operands, and its kind fails that way (Region.raises:
    # cholesky of a matrix that is not positive definite); ``result`` is then ``RAISED``.
    raised: BaseException | None = None
    # What the run had computed when it got here (``Tracer.work``): a run's cost that does not
    # depend on the machine, so that a choice made on it gives one witness everywhere.
    work: int = 0


# ``SiteOutcome.result`` (and ``Witness.result``) of a site whose op raised torch.linalg.LinAlgError.
RAISED = "LinAlgError"


@dataclass
class PendingBranch:
    """A where-branch target evaluated in this run, waiting for the op that discards its value."""

    site: Site
    out: torch.Tensor  # the op's output, attached to the graph
    snap: torch.Tensor  # its values before the call
    call: tuple[Any, tuple, dict, str | None, int | None]  # func, args, kwargs, keyword, index
    distance: torch.Tensor | None
    position: tuple[int, int, int, int] | None


def edge_distance(region: Any, x: torch.Tensor, dtype: str) -> torch.Tensor:
    """How far ``x`` is from the edge of ``region`` (0 for log, +-1 for acos): the objective of a
    where-branch site, whose gradient fails at the edge, not (as a rule) inside the region."""
    x = x.float() if not torch.is_floating_point(x) else x
    if x.numel() == 0:
        return x.new_zeros(())
    parts = [(x - b).abs().min() for b in _edges(region, dtype)]
    if region.nonpositive_integers:
        parts.append(region.distance(x, dtype))
    return torch.stack(parts).min() if parts else x.new_ones(())


def _edges(region: Any, dtype: str) -> list[float]:
    upper = region.upper(dtype)
    points = [region.lo, upper, 0.0 if region.zero else None, region.backward_at]
    return sorted({p for p in points if p is not None})


def _invalid_or_edge(region: Any, snap: torch.Tensor, out: torch.Tensor, dtype: str) -> torch.Tensor | None:
    """Entries of the op's output whose value is non-finite or whose operand sits on the region's
    edge (where the derivative is infinite while the value may be finite: sqrt at 0, acos at 1);
    None when the operand does not broadcast to the output."""
    edge = torch.zeros_like(snap, dtype=torch.bool)
    for b in _edges(region, dtype):
        edge = edge | (snap == b)
    if region.nonpositive_integers:
        edge = edge | ((snap <= 0) & (snap == snap.round()))
    try:
        return edge.expand_as(out) | ~torch.isfinite(out.detach())
    except RuntimeError:
        return None


def classify(t: torch.Tensor) -> str:
    """'nan', 'inf', '-inf' or 'finite' for a tensor (the first non-finite kind, NaN first)."""
    if not torch.is_floating_point(t) and not torch.is_complex(t):
        return "finite"
    t = t.detach()
    if torch.isnan(t).any():
        return "nan"
    if torch.isposinf(t).any():
        return "inf"
    if torch.isneginf(t).any():
        return "-inf"
    return "finite"


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        out: list[torch.Tensor] = []
        for v in value:
            out.extend(_tensors_in(v))
        return out
    return []


def _result_in_float32(func: Any, args: tuple, kwargs: dict) -> Any:
    """The op's result from the same operands computed in float32, with their graph: where the
    float16 result is already inf, this one still says how far beyond the dtype's max it is and
    which way to move. On copies (an in-place op must not write twice), outside any autocast."""

    def up(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and torch.is_floating_point(v):
            return v.to(torch.float32, copy=True)
        if isinstance(v, (list, tuple)):
            return type(v)(up(x) for x in v)
        return v

    kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "dtype")}
    with torch.autocast(device_type="cpu", enabled=False):
        out = func(*up(args), **{k: up(v) for k, v in kwargs.items()})
    return out[0] if isinstance(out, tuple) else out


def get_argument(
    op: Op, args: tuple, kwargs: dict, index: int | None, keyword: str | None
) -> tuple[Any, str | None, int | None]:
    """The argument at ``index`` / ``keyword`` and where it was: (value, keyword, position)."""
    if keyword and keyword in kwargs:
        return kwargs[keyword], keyword, None
    if index is not None and index < len(args):
        return args[index], None, index
    # The runtime spelling may differ (``other`` vs ``divisor``): take the first tensor keyword.
    if index is not None and kwargs:
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                return v, k, None
    return None, None, None


class SourcePositions:
    """Converts frames into source positions in code points, with per-code caches."""

    def __init__(self, texts: dict[str, str]) -> None:
        self._lines = {f: t.splitlines() for f, t in texts.items()}
        self._positions: dict[Any, list] = {}

    def position(self, frame: Any) -> tuple[int, int, int, int] | None:
        code = frame.f_code
        table = self._positions.get(code)
        if table is None:
            table = list(code.co_positions())
            self._positions[code] = table
        i = frame.f_lasti // 2
        if i < 0 or i >= len(table):
            return None
        line, end_line, col, end_col = table[i]
        if line is None:
            return None
        lines = self._lines.get(code.co_filename)
        if col is None or end_col is None or lines is None:
            return (line, 0, end_line or line, 1 << 30)
        return (
            line,
            self._cp(lines, line, col),
            end_line or line,
            self._cp(lines, end_line or line, end_col),
        )

    @staticmethod
    def _cp(lines: list[str], line: int, byte_col: int) -> int:
        if 1 <= line <= len(lines):
            text = lines[line - 1]
            if text.isascii():
                return byte_col
            return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))
        return byte_col


@dataclass
class TracerConfig:
    """What one run watches and substitutes."""

    target_file: str
    texts: dict[str, str]  # co_filename -> source text (target and entry files)
    sites: list[Site]  # sites to map events to (the watched ones)
    user_files: frozenset[str]  # files whose factory calls are inputs
    subs: dict[str, torch.Tensor] = field(default_factory=dict)  # input key -> value to use
    weight_subs: dict[str, torch.Tensor] = field(default_factory=dict)  # parameter key -> delta
    # Parameter key -> its exact value (a training run's state), written into the parameter at
    # its first use: the program's optimizer goes on from there, as it did in the run.
    weight_values: dict[str, torch.Tensor] = field(default_factory=dict)
    target: Site | None = None  # stop at its first evaluation
    target_step: int = 0  # ... at or after this training step (Witness.target_step)
    stop_when_all_reached: bool = False
    watch: frozenset[str] | None = None  # site keys to wait for (default: all of ``sites``)
    record: bool = False  # keep the original value of every external input
    loose_match: bool = False  # replay of edited text: match by start line and kind
    local_backward: bool = True
    # The program differentiates through every site (a training run, or the replay of a witness
    # that failed there): an op whose own gradient overflows from finite operands and a finite
    # output (log of a subnormal, acos at 1) hands its NaN/INF to the weights the optimizer then
    # steps, so it is judged by that gradient too, not only the kinds whose region says so.
    judge_gradients: bool = False
    # Recording runs of a training loop: the sites its first steps do not reach, later steps do not
    # either (as a rule), and a ``while True`` loop would otherwise run to the timeout.
    stop_after_steps: int | None = None
    # The same for a loop that never calls ``backward`` (an evaluation loop): stop once one site
    # has been met this many times again since the run last reached a new one.
    stop_after_rounds: int | None = None
    # ... and, in a loop that trains nothing, once this many torch calls meet no new site (``QUIET_CALLS``).
    quiet_calls: int | None = None
    produced: WeakTensorKeyDictionary | None = (
        None  # tensors made under the mode; shared by one program's runs
    )


class Tracer(RunHere):
    """The TorchFunctionMode of one run. Not reusable across runs."""

    def __init__(self, cfg: TracerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.positions = SourcePositions(cfg.texts)
        self.produced = cfg.produced if cfg.produced is not None else WeakTensorKeyDictionary()
        self.recorded: dict[
            str, torch.Tensor | bool | int | float
        ] = {}  # input key -> original value (record runs; entry arguments may be numbers)
        self.used_inputs: list[str] = []  # keys in order of first use in this run
        self.reached: dict[str, SiteOutcome] = {}  # site key -> first evaluation
        self.param_names: dict[str, str] = {}  # parameter key -> readable name
        # Tensor made outside torch (``from_numpy``, a dataset's array) -> the variable that held it
        # where torch first saw it (record runs): "X", not "operand(...) at line 41", in witnesses.
        self.input_names: dict[str, str] = {}
        self._occurrence: dict[tuple, int] = {}
        self._external: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(orig) -> (orig, replacement)
        self._params: dict[int, tuple[torch.Tensor, str]] = {}
        # The same weights by the memory they view (``_alias_of``); holding each tensor keeps its
        # memory from being reused by an unrelated one while the entry lasts.
        self._by_view: dict[tuple, tuple[torch.Tensor, str]] = {}
        self._param_count = 0
        self._moves_ok = True
        self._name_tries: dict[str, int] = {}
        self._named_by_variable: set[str] = set()
        self._names: dict[Any, str] = {}
        # Input keys whose values only initialise weights (``(0.1 * torch.randn(3, 2)).requires_grad_()``):
        # the search keeps them at their recorded values and moves the weight instead.
        self.weight_inputs: set[str] = set()
        self._search_leaves = {
            id(v): k for k, v in cfg.subs.items() if isinstance(v, torch.Tensor) and v.requires_grad
        }
        self._by_kind: dict[str, list[Site]] = {}
        for s in cfg.sites:
            self._by_kind.setdefault(s.kind, []).append(s)
        self._target_key = cfg.target.key if cfg.target else None
        self.steps = 0  # backward calls seen (training steps)
        self.work = 0  # multiply-adds and elements the run's torch calls made (``_work``)
        self.branch: PendingBranch | None = None  # a where-branch target waiting for its discarding op
        self._watched = set(cfg.watch) if cfg.watch is not None else {s.key for s in cfg.sites}
        self.optimised: set[int] = set()  # ids of tensors some optimizer updates
        self._met_again: dict[str, int] = {}  # site key -> times met since a new site was last reached
        self._quiet_calls = 0  # torch calls since a new site was last reached (``QUIET_CALLS``)

    # --- frames ---------------------------------------------------------------

    def _caller(self) -> Any:
        f = sys._getframe(2)
        while f is not None and os.path.normcase(f.f_code.co_filename).startswith(_DISPATCH_FILES):
            f = f.f_back
        return f

    def _frame_in(self, files: Any) -> Any:
        f = sys._getframe(2)
        while f is not None and f.f_code.co_filename not in files:
            f = f.f_back
        return f

    def _name(self, func: Any) -> str:
        name = self._names.get(func)
        if name is None:
            try:
                name = resolve_name(func) or getattr(func, "__qualname__", repr(func))
            except Exception:
                name = repr(func)
            self._names[func] = name
        return name

    def _input_key(self, frame: Any, name: str) -> str | None:
        """``file.py:line:name#n`` for the n-th tensor made at this place; None past
        ``MAX_OCCURRENCES``: a loop that makes one anew each iteration (a batch) has as many
        occurrences as iterations, and keeping each would grow the run without end."""
        line = frame.f_lineno
        pos = self.positions.position(frame)
        if pos is not None:
            line = pos[0]
        base = (os.path.basename(frame.f_code.co_filename), line, name)
        n = self._occurrence.get(base, 0)
        self._occurrence[base] = n + 1
        if n >= MAX_OCCURRENCES:
            return None
        return f"{base[0]}:{base[1]}:{base[2]}#{n}"

    # --- substitution -----------------------------------------------------------

    def _external_value(self, key: str, original: torch.Tensor) -> torch.Tensor:
        if self.cfg.record and key not in self.recorded:
            self.recorded[key] = original.detach().clone()
        self.used_inputs.append(key)
        sub = self.cfg.subs.get(key)
        if sub is None:
            return original
        # A clone, so the user's in-place updates never touch the search's leaf.
        return sub.clone() if sub.requires_grad else sub.clone().to(original.dtype)

    def _substitute_args(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        changed = False
        new_args = list(args)
        for i, a in enumerate(args):
            r = self._substitute_one(a)
            if r is not a:
                new_args[i] = r
                changed = True
        new_kwargs = kwargs
        for k, v in kwargs.items():
            r = self._substitute_one(v)
            if r is not v:
                if new_kwargs is kwargs:
                    new_kwargs = dict(kwargs)
                new_kwargs[k] = r
                changed = True
        return (tuple(new_args), new_kwargs) if changed else (args, kwargs)

    def _stand_in(self, a: torch.Tensor, moves: bool) -> Any:
        """What this run uses for ``a`` when it is an input or a weight: the input's substitute, the
        weight moved (``moves``) or as it is; None for any other tensor."""
        hit = self._external.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1]
        # A leaf that requires grad was made trainable by the program (nn.Parameter, requires_grad=True,
        # requires_grad_()): a weight. The search's own leaves never reach the program (it gets clones).
        if isinstance(a, torch.nn.Parameter) or (a.is_leaf and a.requires_grad):
            return self._parameter(a) if moves else a
        return None

    def _substitute_one(self, a: Any, within: tuple[Any, int] | None = None) -> Any:
        """``within``: the list ``a`` is item of, and its index there."""
        if type(a) in (list, tuple) and within is None:
            # torch.stack / torch.cat of tensors made outside torch: a custom Dataset's items
            # (``torch.from_numpy(self.X[i])``) meet torch first inside the DataLoader's collate.
            items = [self._substitute_one(x, (a, i)) for i, x in enumerate(a)]
            return a if all(x is y for x, y in zip(items, a)) else type(a)(items)
        if not isinstance(a, torch.Tensor):
            return a
        stand_in = self._stand_in(a, self._moves_ok)
        if stand_in is not None:
            return stand_in
        if a in self.produced:
            return a
        if (
            not (torch.is_floating_point(a) or a.dtype in (torch.int64, torch.int32, torch.bool))
            or a.numel() <= 1
        ):
            return a
        frame = self._frame_in(self.cfg.user_files)
        if frame is None:
            return a
        key = self._input_key(frame, "operand")
        if key is None:
            self.produced[a] = True  # passed through as the program's own from now on
            return a
        r = self._external_value(key, a)
        # Named once, and only if recorded: a training run passes the tensors its loop makes anew
        # each step through unrecorded, and scanning the frame for each of them would be wasted.
        if key in self.recorded and key not in self.input_names:
            line = key.rsplit(":", 2)[1]  # "file.py:line:operand#n"
            name = _bound_name(frame, a) or (self._item_name(frame, *within, line) if within else None)
            if name is not None:
                self.input_names[key] = name
        self._external[id(a)] = (a, r)
        if r is not a:
            self.produced[r] = True
        return r

    def _item_name(self, frame: Any, items: Any, index: int, line: str) -> str:
        """The name of item ``index`` of a list of tensors a torch op got: ``parts[2]`` when a
        variable of ``frame`` holds the list, else where the list met torch (a DataLoader's batch)."""
        held = _bound_name(frame, items)
        if held is not None:
            return f"{held}[{index}]"
        caller = self._caller()
        collated = caller is not None and _DATA_LOADING in os.path.normcase(caller.f_code.co_filename)
        return f"item {index} of the {'batch' if collated else 'list'} at line {line}"

    def _make_trainable(self, args: tuple, kwargs: dict) -> tuple:
        """``t.requires_grad_()`` / ``t.requires_grad = True`` on a tensor made from search inputs.

        Substituted inputs require grad (for the search's gradient), so ``0.1 * torch.randn(3, 2)``
        is not a leaf under search while it is one in the real program, and an optimizer would
        refuse it. When every leaf behind it is a search input, it is cut from them in place (a
        leaf again, as in the real program) and those inputs are noted as weight initialisers.
        """
        t = args[0] if args else None
        flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
        if not isinstance(t, torch.Tensor) or not flag or t.is_leaf or not t.requires_grad:
            return args
        keys = self._search_inputs_behind(t)
        if not keys:
            return args  # also not a leaf in the real program: leave the program's own error alone
        self.weight_inputs.update(keys)
        try:
            t.detach_()
        except RuntimeError:
            # A view cannot be cut in place: ``W = x.view(3, 2).requires_grad_()`` gets a detached copy.
            return (t.detach(),) + tuple(args[1:])
        return args

    @contextlib.contextmanager
    def parameters_noted(self) -> Iterator[None]:
        """For one run: ``nn.Parameter(0.1 * torch.randn(3, 2))`` notes the inputs behind it as
        weight initialisers (see ``_make_trainable``), and every tensor an optimizer is given is
        noted as one the program trains (the others it made trainable are free: ``free_params``).
        Neither call is one the mode sees, so both are wrapped while the run lasts."""
        saved = torch.nn.Parameter.__dict__["__new__"]
        saved_group = torch.optim.Optimizer.add_param_group
        tracer = self

        def new(cls: type, data: Any = None, requires_grad: bool = True) -> Any:
            if isinstance(data, torch.Tensor) and requires_grad and not data.is_leaf and data.requires_grad:
                tracer.weight_inputs.update(tracer._search_inputs_behind(data))
            return saved.__func__(cls, data, requires_grad)

        # Named as torch names them, so the stand-in has the method's exact signature.
        def add_param_group(self: torch.optim.Optimizer, param_group: dict[str, Any]) -> None:
            params = param_group.get("params")
            for p in [params] if isinstance(params, torch.Tensor) else list(params or []):
                tracer.optimised.add(id(p))
            saved_group(self, param_group)

        torch.nn.Parameter.__new__ = staticmethod(new)
        torch.optim.Optimizer.add_param_group = add_param_group
        try:
            yield
        finally:
            torch.nn.Parameter.__new__ = saved
            torch.optim.Optimizer.add_param_group = saved_group

    def free_params(self) -> set[str]:
        """Keys of the tensors the program made trainable itself that no optimizer is given and no
        module owns (free logits, re-wrapped each step by ``Variable(z, requires_grad=True)``):
        the program's free parameters, which the search may take as far as an op needs."""
        return {
            key
            for p, key in self._params.values()
            if id(p) not in self.optimised
            and not isinstance(p, torch.nn.Parameter)
            and torch.is_floating_point(p)
            and p.is_leaf
        }

    def _search_inputs_behind(self, t: torch.Tensor, limit: int = 10000) -> set[str]:
        """Keys of the search inputs among the leaves of ``t``'s graph; empty when any other leaf
        (a real weight) is among them too."""
        keys: set[str] = set()
        for fn in _graph_nodes(t.grad_fn, limit):
            var = getattr(fn, "variable", None)
            if var is not None:
                key = self._search_leaves.get(id(var))
                if key is None:
                    return set()
                keys.add(key)
        return keys

    def _alias_of(self, p: torch.Tensor) -> str | None:
        """The key of a known weight that ``p`` is another tensor object of: the same view of the same
        memory. ``z = Variable(z, requires_grad=True)`` in each iteration of a loop makes a new leaf
        of z's data; it is one weight of the program, moved as one, and a new key per iteration
        would keep one more tensor (and look for its name) every iteration of an endless loop."""
        view = _view_of(p)
        hit = self._by_view.get(view)
        if hit is None or hit[0] is p or _view_of(hit[0]) != view:
            # the last: that weight's memory has moved since (``module.cuda()`` sets ``p.data``),
            # and ``p`` only got its old address: another weight
            return None
        return hit[1]

    def _parameter(self, p: torch.Tensor) -> torch.Tensor:
        hit = self._params.get(id(p))
        alias = self._alias_of(p) if hit is None else None
        if alias is not None:
            key = alias
        elif hit is None:
            key = f"param#{self._param_count}"
            self._param_count += 1
            self._params[id(p)] = (p, key)
            self._by_view[_view_of(p)] = (p, key)
            self.param_names[key] = self._parameter_name(p, key)
            value = self.cfg.weight_values.get(key)
            if value is not None and value.shape == p.shape:
                with torch.no_grad():
                    p.copy_(value)
        else:
            key = hit[1]
            tries = self._name_tries.get(key, 0)
            if tries < 16 and key not in self._named_by_variable:
                # First seen while the module was being built (no variable holds it yet): retry.
                self._name_tries[key] = tries + 1
                self.param_names[key] = self._parameter_name(p, key)
        delta = self.cfg.weight_subs.get(key)
        if delta is None:
            return p
        moved = p.detach() + delta
        if moved.dtype != p.dtype:
            # A float64 delta (a landing move aimed at one representable value) still moves a
            # weight of the program's dtype; the sum is rounded once, the same in every replay.
            moved = moved.to(p.dtype)
        if p.requires_grad and not moved.requires_grad:
            # A replayed move is a plain tensor: the moved weight must stay one the program
            # differentiates, or a gradient failure (where-branch sites) could not replay.
            moved.requires_grad_(True)
        return moved

    def _parameter_name(self, p: torch.Tensor, key: str) -> str:
        """Readable name: the user's variable holding it or its module (``model.fc.weight``),
        else the owning module's class (``Linear.weight``), else ``param#<k>``."""
        f = self._frame_in(self.cfg.user_files)
        while f is not None:
            if f.f_code.co_filename in self.cfg.user_files:
                for scope in (f.f_locals, f.f_globals):
                    for var, value in list(scope.items()):
                        if value is p:
                            self._named_by_variable.add(key)
                            return var
                        if isinstance(value, torch.nn.Module) and var != "self":
                            for name, q in value.named_parameters():
                                if q is p:
                                    self._named_by_variable.add(key)
                                    return f"{var}.{name}"
            f = f.f_back
        f = sys._getframe(3)
        while f is not None:
            owner = f.f_locals.get("self")
            if isinstance(owner, torch.nn.Module):
                for name, q in owner.named_parameters():
                    if q is p:
                        return f"{type(owner).__name__}.{name}"
            f = f.f_back
        return key

    # --- the mode ---------------------------------------------------------------

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.cfg.quiet_calls is not None and not self.steps:
            self._quiet_calls += 1
            if self._quiet_calls > self.cfg.quiet_calls:
                raise RunStopped()
        name, func, args, kwargs = on_cpu(self._name(func), func, args, kwargs)
        if name in _TRANSPOSES and torch.is_grad_enabled() and args:
            args = (self._transposed_operand(args[0]), *args[1:])
        if name.endswith("__get__") or name in ("torch.Tensor.__repr__", "torch.Tensor.__format__"):
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                self.produced[out] = True  # x.grad, x.data, x.T: the program's own tensors
            return out
        # In-place ops and no-grad code (parameter init, optimizer steps) must act on the real
        # parameters: a substituted copy would swallow their writes.
        self._moves_ok = (
            torch.is_grad_enabled()
            and (not name.endswith("_") or name in _OPERATORS)
            and not name.startswith("torch.nn.init")
        )
        args, kwargs = self._substitute_args(args, kwargs)
        if name in _MAKE_TRAINABLE:
            args = self._make_trainable(args, kwargs)
        if name in BACKWARD and self._keeps_graphs() and kwargs.get("retain_graph") is None and len(args) < 3:
            # Substituted inputs require grad, so a tensor the program derives from them once,
            # before its loop (``captions = images @ P``), carries a graph every step
            # backpropagates through: kept, or the second step fails where the program's own
            # run does not (and no gradient reaches the inputs a later step evaluates).
            kwargs = {**kwargs, "retain_graph": True}
        rows = [op for op in lookup(name) if op.kind in self._by_kind]
        if rows:
            out = self._at_site(func, rows, args, kwargs)
        else:
            out = func(*args, **kwargs)
        self.work += _work(name, args, out)
        if self.branch is not None and name in DISCARDING:
            self._discarded(args[0] if name == "torch.Tensor.__setitem__" and args else out)
        if name in BACKWARD:
            self.steps += 1
            if self.cfg.stop_after_steps is not None and self.steps >= self.cfg.stop_after_steps:
                raise RunStopped()
            if (
                self._target_key is not None
                and self.cfg.target_step
                and (self.steps > self.cfg.target_step + TARGET_STEP_SLACK)
            ):
                # The target was aimed at some steps in and training went past them without it: it
                # is met before the loop only (or rarely), and an endless loop would run to the clock.
                raise RunStopped()
        if name in RANDOM_FACTORIES or name in DATA_FACTORIES or name in CONSTANT_FACTORIES:
            out = self._factory(name, out)
        for t in _tensors_in(out):
            self.produced[t] = True
        return out

    def _keeps_graphs(self) -> bool:
        """Whether the run goes on through training steps while its inputs require grad."""
        return self.cfg.target_step > 0

    def _transposed_operand(self, a: Any) -> Any:
        """What ``a.T`` (``.mT``, ``.H``, ``.mH``) must transpose: ``W @ W.T`` must see one W, so a
        moved weight's transpose is the moved weight's, and a substituted input's the substitute's
        (else the product is no longer symmetric: a false "not positive definite" in cholesky).
        Nothing else is substituted here: a tensor first seen at a getter is not made a new input."""
        if not isinstance(a, torch.Tensor):
            return a
        stand_in = self._stand_in(a, moves=True)
        return a if stand_in is None else stand_in

    def _factory(self, name: str, out: Any) -> Any:
        if not isinstance(out, torch.Tensor):
            return out
        if (name in DATA_FACTORIES or name in CONSTANT_FACTORIES) and out.numel() <= 1:
            return out
        if out.requires_grad:
            # ``torch.randn(3, 2, requires_grad=True)``: a weight the program will optimise, which
            # must stay the leaf it made (optimizers refuse anything else); moved as a weight.
            return out
        caller = self._caller()
        if caller is None or caller.f_code.co_filename not in self.cfg.user_files:
            return out
        if name in CONSTANT_FACTORIES and caller.f_code.co_filename == self.cfg.target_file:
            return out
        key = self._input_key(caller, name)
        if key is None or name in _INPLACE_FACTORIES:
            return out
        return self._external_value(key, out)

    def _match(self, op: Op, pos: tuple[int, int, int, int] | None) -> Site | None:
        if pos is None:
            return None
        best: Site | None = None
        exact = KINDS[op.kind].region.nests
        for s in self._by_kind.get(op.kind, ()):
            sp = s.span
            if exact and (sp.start_line, sp.start_col, sp.end_line, sp.end_col) != tuple(pos):
                continue
            inside = (sp.start_line, sp.start_col) <= (pos[0], pos[1]) and (pos[2], pos[3]) <= (
                sp.end_line,
                sp.end_col,
            )
            if inside:
                if best is None or (sp.end_line, sp.end_col, -sp.start_line, -sp.start_col) < (
                    best.span.end_line,
                    best.span.end_col,
                    -best.span.start_line,
                    -best.span.start_col,
                ):
                    best = s
        if best is None and self.cfg.loose_match:
            for s in self._by_kind.get(op.kind, ()):
                if s.span.start_line == pos[0]:
                    return s
        return best

    def _site_at(self, op: Op) -> tuple[Site | None, tuple[int, int, int, int] | None]:
        """The watched Site this call of ``op`` is, by the position of its frame in the target file."""
        frame = self._frame_in((self.cfg.target_file,))
        pos = self.positions.position(frame) if frame is not None else None
        return self._match(op, pos), pos

    def _evaluate(
        self,
        site: Site,
        func: Any,
        op: Op,
        args: tuple,
        kwargs: dict,
        pos: tuple[int, int, int, int] | None,
        with_distance: bool,
    ) -> tuple[Any, SiteOutcome]:
        """Call the op and judge this evaluation of ``site``; the objective is attached when asked."""
        # Everything about the operands is taken before the call: in-place forms (log_, /=)
        # overwrite them with the result.
        operand, kw, idx = get_argument(op, args, kwargs, op.operand_index, op.operand_keyword)
        inputs = _tensors_in(list(args)) + _tensors_in(list(kwargs.values()))
        region = KINDS[site.kind].region
        # Masked scores hold -inf on purpose: for such a kind only other non-finite operands come
        # from upstream. An infinity that a site broken earlier in this run produced stays that
        # site's finding.
        accepted = ("finite", *region.inf_operands)
        upstream = any(classify(t) not in accepted for t in inputs) or (
            isinstance(operand, float) and not math.isfinite(operand) and not region.inf_operands
        )
        if "inf" in region.inf_operands and not upstream:
            upstream = any(o.found for o in self.reached.values())
        is_tensor = isinstance(operand, torch.Tensor)
        snap = operand.detach().clone() if is_tensor else None
        dist = None
        if with_distance and is_tensor and not upstream:
            try:
                # On a clone, so that an in-place op cannot invalidate what backward needs.
                if site.discarded_by is not None:
                    dist = edge_distance(region, operand.clone(), str(operand.dtype))
                elif region.beyond_max:
                    dist = region.distance(_result_in_float32(func, args, kwargs), str(operand.dtype))
                else:
                    dist = region.distance(operand.clone(), str(operand.dtype), hermitian=op.hermitian)
            except Exception:
                dist = None
        try:
            out = func(*args, **kwargs)
        except LinAlgError as failure:
            if not region.raises or upstream:
                raise  # not this kind's failure, or operands already non-finite: not this site's bug
            outcome = SiteOutcome(site, True, RAISED, operand=snap, distance=dist, raised=failure)
            outcome.position = pos
            return None, outcome
        outcome = self._judge(site, func, args, kwargs, out, snap, kw, idx, upstream, dist)
        outcome.position = pos
        if (
            with_distance
            and site.discarded_by is not None
            and not upstream
            and isinstance(operand, torch.Tensor)
            and snap is not None
            and isinstance(out, torch.Tensor)
            and out.requires_grad
        ):
            self.branch = PendingBranch(site, out, snap, (func, args, kwargs, kw, idx), dist, pos)
        return out, outcome

    def _sites_among(
        self, rows: list[Op], wanted: Callable[[Site], bool], target: Callable[[Site], bool]
    ) -> list[tuple[Op, Site, tuple[int, int, int, int] | None]]:
        """The watched sites this call is, with their rows, the one to judge it as first. One call
        may be the site of several kinds (``a * b``: an intended infinity's product and a float16
        overflow; ``x.var()``: one element and an overflow): it is judged as a ``target`` site if
        one of them is, else as the first one, in catalogue order, that ``wanted`` admits."""
        found = []
        for op in rows:
            site, pos = self._site_at(op)
            if site is not None and wanted(site):
                found.append((op, site, pos))
        return sorted(found, key=lambda f: not target(f[1]))  # stable: catalogue order otherwise

    def _at_site(self, func: Any, rows: list[Op], args: tuple, kwargs: dict) -> Any:
        met = self._sites_among(rows, lambda s: True, lambda s: s.key == self._target_key)
        unreached = [m for m in met if m[1].key not in self.reached]
        if not unreached:
            if met:
                self._met_again_at(met[0][1].key)
            return func(*args, **kwargs)
        self._met_again.clear()
        self._quiet_calls = 0
        op, site, pos = unreached[0]
        is_target = site.key == self._target_key
        early = is_target and self.steps < self.cfg.target_step
        out, outcome = self._evaluate(
            site, func, op, args, kwargs, pos, with_distance=is_target and not early
        )
        if early and not outcome.found:
            # The state the search wants is training steps away; moved weights that training takes
            # further may break the site sooner, and that run is a witness all the same.
            return out
        outcome.step = self.steps
        outcome.work = self.work
        self.reached[site.key] = outcome
        for _, other, _ in unreached[1:]:
            # The same call as another kind's site: reached, and searched as its own target later.
            self.reached.setdefault(other.key, SiteOutcome(other, False, "finite", operand=outcome.operand))
        if is_target and self.branch is not None and self.branch.site.key == site.key:
            return out  # a where-branch target: judged at the op that discards its value
        if is_target:
            raise TargetReached(outcome)
        if outcome.raised is not None:
            raise outcome.raised  # the program fails here, as it does when nobody watches
        if self.cfg.stop_when_all_reached and self._watched.issubset(self.reached):
            raise AllSitesReached()
        return out

    def _met_again_at(self, key: str) -> None:
        cap = self.cfg.stop_after_rounds
        if cap is None or self.steps:
            return  # a loop that trains is counted in steps
        n = self._met_again[key] = self._met_again.get(key, 0) + 1
        if n >= cap:
            raise RunStopped()

    def _judge(
        self,
        site: Site,
        func: Any,
        args: tuple,
        kwargs: dict,
        out: Any,
        snap: torch.Tensor | None,
        kw: str | None,
        idx: int | None,
        upstream: bool,
        dist: torch.Tensor | None,
    ) -> SiteOutcome:
        """The oracle: found only when every operand was finite and the output (or local gradient) is not."""
        if upstream:
            return SiteOutcome(site, False, "upstream", operand=snap)
        if site.discarded_by is not None:
            # Its NaN/INF forward value is discarded by the program: only the backward pass counts
            # (``_discarded``), with the gradient the program really sends, not a unit one.
            return SiteOutcome(site, False, "finite", operand=snap, distance=dist)
        region = KINDS[site.kind].region
        result = "finite"
        for t in _tensors_in(out):
            result = classify(t)
            if result != "finite":
                break
        if result != "finite" and region.inf_operands and result != "nan":
            # log_softmax of a partly masked row is -inf where masked, a masked sum is -inf: intended.
            result = "finite"
        if result != "finite":
            return SiteOutcome(
                site, True, result, operand=snap, bad_value=_bad_value(snap, _tensors_in(out)[0])
            )
        if (
            self.cfg.local_backward
            and (
                region.backward_at is not None
                or self.cfg.judge_gradients
                or (region.gradient and self._differentiated(out))
            )
            and snap is not None
            and torch.is_floating_point(snap)
        ):
            back = _local_backward(func, args, kwargs, kw, idx, snap)
            # Only the kinds whose region says so fail in the backward pass of a program that
            # differentiates nothing there; the others need a gradient the program computes.
            if back is not None and (region.backward_at is not None or self._differentiated(out)):
                return SiteOutcome(site, True, back[0], phase="backward", operand=snap, bad_value=back[1])
        return SiteOutcome(site, False, "finite", operand=snap, distance=dist)

    def _input_leaves(self) -> set[int]:
        """Ids of the leaves that stand for program inputs in this run (the search's), not weights."""
        return set(self._search_leaves)

    def _differentiated(self, out: Any) -> bool:
        """Whether the op's output depends on a tensor the program differentiates: a gradient kind's
        backward failure is reachable only then (an input the engine made a leaf is not one)."""
        inputs = self._input_leaves()
        return any(t.requires_grad and _real_leaves(t, inputs) for t in _tensors_in(out))

    # --- where-branch sites ---------------------------------------------------------------

    def _discarded(self, value: Any) -> None:
        """``value`` came out of an op that may discard the pending where-branch site's value: if it
        depends on that value, run the backward pass from it and judge the site (see the module
        docstring); a target so judged stops the run."""
        b = self.branch
        if b is None or not isinstance(value, torch.Tensor) or not value.requires_grad:
            return
        if not _reaches(value.grad_fn, b.out.grad_fn):
            return
        self.branch = None
        outcome = self._judge_branch(b, value)
        outcome.step = self.steps
        self.reached[b.site.key] = outcome
        if b.site.key == self._target_key:
            raise TargetReached(outcome)

    def _judge_branch(self, b: PendingBranch, value: torch.Tensor) -> SiteOutcome:
        not_found = SiteOutcome(
            b.site, False, "finite", "backward", operand=b.snap, distance=b.distance, position=b.position
        )
        # A gradient only the leaves standing for inputs would receive (the search's, or those a
        # training run steers) is one the program never computes.
        func, args, kwargs, _, _ = b.call
        inputs = _tensors_in(list(args)) + _tensors_in(list(kwargs.values()))
        weights = [leaf for t in inputs if t.requires_grad for leaf in _real_leaves(t, self._input_leaves())]
        if not weights or not torch.is_floating_point(value):
            return not_found
        with torch.enable_grad():
            try:
                (upstream,) = vjp([value], [b.out], [torch.ones_like(value)], retain_graph=True)
            except RuntimeError:
                return not_found
            if upstream is None:
                return not_found
            if not bool(torch.isfinite(upstream).all()):
                return SiteOutcome(b.site, False, "upstream", "backward", operand=b.snap, position=b.position)
            # Every input's gradient from this op alone: a divisor's zero breaks the numerator's too.
            region = KINDS[b.site.kind].region
            where = _invalid_or_edge(region, b.snap, b.out, str(b.snap.dtype))
            bad: list[torch.Tensor] = []
            for g in _input_gradients(func, args, kwargs, upstream):
                nonfinite = ~torch.isfinite(g)
                if where is not None and g.shape == where.shape:
                    nonfinite = nonfinite & where
                if bool(nonfinite.any()):
                    bad.append(g[nonfinite])
            if not bad:
                return not_found
            try:
                grads = vjp([value], weights, [torch.ones_like(value)], retain_graph=True)
            except RuntimeError:
                return not_found
        if not any(g is not None and not bool(torch.isfinite(g).all()) for g in grads):
            return not_found  # stopped on the way (a ReLU's zero derivative), as it is in the program
        bad_value = None
        if where is not None and b.snap.shape == where.shape and bool(where.any()):
            bad_value = float(b.snap[where].flatten()[0])
        return SiteOutcome(
            b.site,
            True,
            classify(bad[0]),
            "backward",
            operand=b.snap,
            bad_value=bad_value,
            position=b.position,
        )

    def branch_left_open(self) -> SiteOutcome | None:
        """The run ended with the where-branch target's value never discarded: not found, with its
        objective, so the search still knows how close it came."""
        b, self.branch = self.branch, None
        if b is None or b.site.key != self._target_key:
            return None
        return SiteOutcome(
            b.site, False, "finite", "backward", operand=b.snap, distance=b.distance, position=b.position
        )


def _view_of(t: torch.Tensor) -> tuple:
    """What makes two tensor objects one view of one memory: address, shape, strides, dtype (an
    empty tensor has no memory to share: it is only itself)."""
    if not t.numel():
        return (id(t),)
    try:
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)
    except (RuntimeError, NotImplementedError):  # sparse and other layouts without one address
        return (id(t),)


def _graph_nodes(start: Any, limit: int) -> Iterator[Any]:
    """The autograd nodes behind ``start`` (itself included), each once, at most ``limit`` of
    them (a graph of a long training loop can be huge). A leaf's node (``variable``) has none
    behind it."""
    todo, seen = [start], set()
    while todo and len(seen) < limit:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        yield fn
        todo.extend(f for f, _ in fn.next_functions)


def _reaches(start: Any, goal: Any, limit: int = 4000) -> bool:
    """Whether the autograd node ``goal`` is among ``start``'s graph (``start`` included)."""
    return any(fn is goal for fn in _graph_nodes(start, limit))


def _real_leaves(t: torch.Tensor, search_leaves: set[int], limit: int = 4000) -> list[torch.Tensor]:
    """The leaves behind ``t`` that the program itself differentiates: weights, tensors it made
    trainable, and the search's weight deltas (which stand for weights); not the search's inputs."""
    if t.grad_fn is None:
        # A leaf itself (a tensor the program made trainable, its witness value put in place):
        # it has no graph behind it, but it is what the program differentiates.
        return [t] if t.requires_grad and id(t) not in search_leaves else []
    leaves = (getattr(fn, "variable", None) for fn in _graph_nodes(t.grad_fn, limit))
    return [var for var in leaves if var is not None and id(var) not in search_leaves]


def _bad_value(operand: torch.Tensor | None, out: torch.Tensor) -> float | None:
    """The operand element at the first non-finite output element (when shapes line up)."""
    if operand is None:
        return None
    try:
        bad = ~torch.isfinite(out.detach())
        if operand.shape == out.shape:
            return float(operand[bad].flatten()[0])
        if operand.numel() == 1:
            return float(operand.flatten()[0])
        # Broadcasting or reductions: the operand element closest to trouble is shown by the caller.
        return None
    except Exception:
        return None


def vjp(
    outputs: list[torch.Tensor],
    inputs: list[torch.Tensor],
    grads: list[torch.Tensor],
    retain_graph: bool = False,
) -> tuple[torch.Tensor | None, ...]:
    """``torch.autograd.grad(outputs, inputs, grads, allow_unused=True)``, asked as the gradient
    of one real scalar, ``sum((o * g).sum())``: the same vector-Jacobian product. Why: given
    explicit ``grad_outputs``, torch imports ``torch.fx.experimental.symbolic_shapes`` (and
    sympy) at the first call, about half a second of every worker's first search."""
    if any(o.is_complex() or g.is_complex() for o, g in zip(outputs, grads)):
        return torch.autograd.grad(outputs, inputs, grads, retain_graph=retain_graph, allow_unused=True)
    total = sum((o * g.detach()).sum() for o, g in zip(outputs, grads))
    assert isinstance(total, torch.Tensor)
    return torch.autograd.grad(total, inputs, retain_graph=retain_graph, allow_unused=True)


def _local_backward(
    func: Any, args: tuple, kwargs: dict, kw: str | None, idx: int | None, before: torch.Tensor
) -> tuple[str, float] | None:
    """The gradient of this one op w.r.t. its operand (its value ``before`` the call), when that alone is non-finite."""
    g = _operand_gradient(func, args, kwargs, kw, idx, before, None)
    if g is None:
        return None
    kind = classify(g)
    if kind == "finite":
        return None
    bad = ~torch.isfinite(g)
    return kind, float(before.detach()[bad].flatten()[0])


def _input_gradients(func: Any, args: tuple, kwargs: dict, upstream: torch.Tensor) -> list[torch.Tensor]:
    """The gradients this one op sends each of its floating-point tensor inputs for the gradient
    ``upstream`` of its output (recomputed on detached copies, so nothing else is involved)."""
    leaves: list[torch.Tensor] = []

    def fresh(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and torch.is_floating_point(a):
            leaf = a.detach().clone().requires_grad_(True)
            leaves.append(leaf)
            return leaf.clone()  # a non-leaf, so that in-place forms may write to it
        return a

    new_args = tuple(fresh(a) for a in args)
    new_kwargs = {k: fresh(v) for k, v in kwargs.items()}
    with torch.enable_grad():
        try:
            out = func(*new_args, **new_kwargs)
        except RuntimeError:
            return []
        if not leaves or not isinstance(out, torch.Tensor) or not out.requires_grad:
            return []
        gs = vjp([out], leaves, [upstream.expand_as(out)])
    return [g for g in gs if g is not None]


def _operand_gradient(
    func: Any,
    args: tuple,
    kwargs: dict,
    kw: str | None,
    idx: int | None,
    before: torch.Tensor,
    upstream: torch.Tensor | None,
) -> torch.Tensor | None:
    """The gradient this one op sends its operand (value ``before`` the call) for the gradient
    ``upstream`` of its output (ones when None), or None when it has none."""
    if kw is None and idx is None:
        return None
    leaf = before.detach().clone().requires_grad_(True)
    arg = leaf.clone()  # a non-leaf, so that in-place forms (sqrt_) may write to it
    if kw is not None:
        kwargs = {**kwargs, kw: arg}
    else:
        args = tuple(arg if i == idx else a for i, a in enumerate(args))
    with torch.enable_grad():
        try:
            out = func(*args, **kwargs)
        except RuntimeError:
            return None
        # A decomposition returns a tuple (eigh: values and vectors): a unit gradient on each output.
        outs = [o for o in _tensors_in(out) if o.requires_grad]
        if not outs or (upstream is not None and len(outs) != 1):
            return None
        grads = [torch.ones_like(o) if upstream is None else upstream.detach().expand_as(o) for o in outs]
        (g,) = vjp(outs, [leaf], grads)
    return g


def trace_call(tracer: Tracer, body: Callable[[], Any]) -> tuple[SiteOutcome | None, BaseException | None]:
    """Run ``body`` under ``tracer``: (target outcome or None, the user's exception or None)."""
    outcome = None
    error: BaseException | None = None
    try:
        with tracer, tracer.parameters_noted():
            body()
    except TargetReached as stop:
        outcome = stop.outcome
    except RunStopped:
        pass
    except SystemExit as e:
        if e.code not in (None, 0):
            error = e
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the user's program failed: the caller decides what that means
        error = e
    if outcome is None:
        outcome = tracer.branch_left_open()
    return outcome, error


def _bound_name(frame: Any, value: Any) -> str | None:
    """The local (else global) variable of ``frame`` that holds ``value`` itself, else the numpy
    array a tensor ``value`` was made from (``torch.from_numpy(data).float()``: the tensor is a temporary,
    ``data`` is what the user knows it by)."""
    scopes = (frame.f_locals, frame.f_globals)
    for scope in scopes:
        for name, held in scope.items():
            if held is value and not name.startswith("__"):
                return name
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or not value.numel():
        return None
    for scope in scopes:
        for name, held in scope.items():
            if _shares_memory(held, value) and not name.startswith("__"):
                return name
    return None


def _shares_memory(array: Any, t: torch.Tensor) -> bool:
    """Whether ``array`` is a numpy array whose buffer ``t`` views whole (``torch.from_numpy``)."""
    interface = getattr(array, "__array_interface__", None) if type(array).__name__ == "ndarray" else None
    return (
        isinstance(interface, dict)
        and interface["data"][0] == t.data_ptr()
        and tuple(interface["shape"]) == tuple(t.shape)
    )
