"""Value ranges: an interval + sign abstraction of expressions over the dataflow graph.

A ``Fact`` is a closed interval ``[lo, hi]`` of floats (``±inf`` allowed), a
``nonzero`` flag (the sign part: ``torch.where(d == 0, 1, d)`` straddles zero
yet never is zero), the Python-level type when known (``num`` for Python
numbers, ``str``, ``tensor``, ``object`` ...; the site finder uses it to skip
``"%d" % n`` and ``n / 2``), and ``why``: a few words on where the range comes
from, used in verdict reasons.

Everything is conservative: an unknown expression is ``TOP``; endpoints are
rounded outward to the analysed dtype (``p + 1e-10`` stays above 0 in float32
but not in float16, where 1e-10 rounds to 0); a cycle through the graph (a loop
redefining a name) is cut with ``TOP``; trainable tensors (``nn.Parameter``,
``requires_grad=True``) have no range. The analysis is per expression,
memoised, and on demand: only what the site finder asks about (operands,
operator sides, method receivers) is evaluated.

Assumptions, by design: a parameter's range is the join of its default value
and of the arguments calls in this file pass (a parameter of a public function
without a default has no range; one of a private function that escapes as a
value has none either); ``self.x`` joins every assignment in the class.
Aliasing through second names or containers is not tracked. A sum of values
``>= lo > 0`` is ``>= lo`` unless its tensor may be empty by provenance.py's
rule (the one the mean kind uses: only data-dependent selections are);
``len``/``shape[k]``/``size(k)``/``numel`` are ``>= 1`` only where sizes.py
proves it from the program's own indexing or guards.

Transfer functions of library calls are added as small functions in
``TRANSFERS`` (one per family, keyed by short name), not to ``_known_call``.
"""

from __future__ import annotations

import ast
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from grist_lsp.analyzer.catalogue import Region, dtype_limits
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.sizes import SizeProofs

if TYPE_CHECKING:
    from grist_lsp.analyzer.provenance import Provenance

INF = math.inf
# How far F.normalize / F.cosine_similarity outputs stray past +-1 by rounding
# (measured: cosine_similarity of near-parallel float32 vectors reaches 1 + 3.6e-7).
UNIT_SLOP = 1e-6
MAX_DEPTH = 60  # evaluation depth before giving up with TOP (never a RecursionError)
_A = TypeVar("_A")  # what a memoised range query is asked about (a Def, an expression)

# machine epsilon (torch.finfo(dtype).eps), distinct from the catalogue's fix eps
_MACHINE_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
_SMALLEST_SUBNORMAL = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 5e-324}


@dataclass(frozen=True)
class Fact:
    lo: float = -INF
    hi: float = INF
    nonzero: bool = False
    pytype: str = "unknown"  # num | str | tensor | object | module | none | unknown | bottom
    why: str = ""

    @property
    def known(self) -> bool:
        return self.lo != -INF or self.hi != INF or self.nonzero

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi and self.pytype != "bottom"

    def with_type(self, pytype: str) -> Fact:
        return replace(self, pytype=pytype)


TOP = Fact()
CYCLE = Fact(pytype="cycle")
BOTTOM = Fact(INF, -INF, True, "bottom", "unreachable")


def join(facts: list[Fact], why: str | None = None) -> Fact:
    live = [f for f in facts if f.pytype != "bottom"]
    if not live:
        return BOTTOM if facts else TOP
    types = {f.pytype for f in live if f.pytype != "cycle"} or {"unknown"}
    whys = []
    for f in live:
        if f.why and f.why not in whys:
            whys.append(f.why)
    return Fact(
        min(f.lo for f in live),
        max(f.hi for f in live),
        all(f.nonzero for f in live),
        types.pop() if len(types) == 1 else "unknown",
        why if why is not None else (whys[0] if len(whys) == 1 else " or ".join(whys[:3])),
    )


# --- rounding to the analysed dtype ------------------------------------------------

_FORMATS = {"float16": ("<e", "<H", 16), "float32": ("<f", "<I", 32)}


def _ordinal(v: float, dtype: str) -> int:
    """Floats of a dtype as consecutive integers (negative floats negative)."""
    ffmt, ifmt, nbits = _FORMATS[dtype]
    bits = struct.unpack(ifmt, struct.pack(ffmt, v))[0]
    sign = 1 << (nbits - 1)
    return -(bits & (sign - 1)) if bits & sign else bits


def _from_ordinal(o: int, dtype: str) -> float:
    ffmt, ifmt, nbits = _FORMATS[dtype]
    bits = ((-o) | (1 << (nbits - 1))) if o < 0 else o
    return struct.unpack(ffmt, struct.pack(ifmt, bits))[0]


def _nearest(v: float, dtype: str) -> float:
    try:
        return struct.unpack(_FORMATS[dtype][0], struct.pack(_FORMATS[dtype][0], v))[0]
    except OverflowError:
        return math.copysign(INF, v)


def round_down(v: float, dtype: str) -> float:
    """The largest value of ``dtype`` <= v (what a computed lower bound can really be)."""
    if math.isnan(v):
        return -INF
    if math.isinf(v) or dtype == "float64":
        return v
    if dtype == "bfloat16":
        o = _ordinal(round_down(v, "float32"), "float32")
        r = (
            _from_ordinal((o // 65536) * 65536, "float32")
            if o >= 0
            else -_from_ordinal(-((o // 65536) * 65536), "float32")
        )
        return r
    r = _nearest(v, dtype)
    if r > v:
        r = -INF if math.isinf(r) and r > 0 and v < 0 else _from_ordinal(_ordinal(r, dtype) - 1, dtype)
    if math.isinf(r) and r > 0:  # v above the dtype's max rounds to max, then overflows in arithmetic
        return _from_ordinal(_ordinal(dtype_limits(dtype).max, dtype), dtype)
    return r


def round_up(v: float, dtype: str) -> float:
    if math.isnan(v):
        return INF
    return -round_down(-v, dtype)


# --- arithmetic ----------------------------------------------------------------------


def _safe(fn: Callable[..., float], *args: float | str, default: float = math.nan) -> float:
    try:
        return float(fn(*args))
    except (OverflowError, ValueError, ZeroDivisionError):
        return default


def _corners(values: list[float]) -> tuple[float, float]:
    vals = [0.0 if math.isnan(v) else v for v in values]
    return min(vals), max(vals)


def _square(f: Fact) -> tuple[float, float]:
    lo, hi = f.lo, f.hi
    a, b = _safe(lambda x: x * x, lo, default=INF), _safe(lambda x: x * x, hi, default=INF)
    if lo <= 0.0 <= hi:
        return 0.0, max(a, b)
    return min(a, b), max(a, b)


def pow_interval(base: Fact, c: float) -> tuple[float, float] | None:
    """Range of base ** c for a constant exponent; None when unknown."""
    if c == 0:
        return 1.0, 1.0
    p = lambda x: _safe(lambda v: math.pow(v, c), x, default=INF)  # noqa: E731
    if float(c).is_integer():
        n = int(c)
        if n > 0 and n % 2 == 0:
            lo, hi = _square(base)
            return (p(math.sqrt(lo)) if lo > 0 else 0.0), (
                INF if hi == INF else p(max(abs(base.lo), abs(base.hi)))
            )
        if n > 0:
            return p(base.lo) if base.lo != -INF else -INF, p(base.hi) if base.hi != INF else INF
        # negative integer power: 1 / x**|n|
        if base.lo > 0:
            return p(base.hi) if base.hi != INF else 0.0, p(base.lo)
        if base.hi < 0 and n % 2 == 0:
            return p(base.lo) if base.lo != -INF else 0.0, p(base.hi)
        if base.hi < 0:
            return p(base.hi), p(base.lo) if base.lo != -INF else 0.0
        return (0.0, INF) if n % 2 == 0 else None
    lo = max(base.lo, 0.0)
    if base.hi < 0:
        return None
    if c > 0:
        return p(lo), (INF if base.hi == INF else p(base.hi))
    if lo > 0:
        return (0.0 if base.hi == INF else p(base.hi)), p(lo)
    return 0.0, INF


def pow_range_safe(base: Fact, exponent: Fact) -> bool:
    """base ** e with e anywhere in a known range (not one constant): safe when the base is
    positive (any exponent), or non-negative with a non-negative exponent (0 ** e is 0 or 1).
    A negative base needs an integer exponent, which a range cannot say."""
    if base.pytype == "bottom" or exponent.pytype == "bottom":
        return True
    return base.lo > 0 or (base.lo >= 0 and exponent.lo >= 0)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt(v: float) -> str:
    if v == INF:
        return "inf"
    if v == -INF:
        return "-inf"
    return f"{v + 0.0:.7g}"  # + 0.0 turns -0.0 into 0.0


def describe(f: Fact) -> str:
    """``>= 1e-08``, ``in [0, 1]``, ``!= 0`` ... for verdict reasons."""
    if f.pytype == "bottom":
        return "unreachable"
    parts = []
    if f.lo == -INF and f.hi == INF:
        parts.append("unbounded")
    elif f.hi == INF:
        parts.append(f">= {fmt(f.lo)}")
    elif f.lo == -INF:
        parts.append(f"<= {fmt(f.hi)}")
    elif f.lo == f.hi or abs(f.hi - f.lo) <= 1e-6 * abs(f.lo):  # a constant, widened by rounding
        parts.append(f"== {fmt((f.lo + f.hi) / 2)}")
    else:
        parts.append(f"in [{fmt(f.lo)}, {fmt(f.hi)}]")
    if f.nonzero and f.lo <= 0 <= f.hi:
        parts.append("and != 0")
    return " ".join(parts)


def static_safe(f: Fact, region: Region, dtype: str) -> bool:
    """Region.static_safe over a fact, splitting a nonzero interval around 0."""
    if f.pytype == "bottom":
        return True
    if f.nonzero and f.lo <= 0.0 <= f.hi:
        tiny = _SMALLEST_SUBNORMAL.get(dtype, 5e-324)
        pieces = []
        if f.lo < 0:
            pieces.append((f.lo, min(f.hi, -tiny)))
        if f.hi > 0:
            pieces.append((max(f.lo, tiny), f.hi))
        return bool(pieces) and all(region.static_safe(lo, hi, dtype) for lo, hi in pieces)
    return region.static_safe(f.lo, f.hi, dtype)


# --- short names of the calls we know, by what they do to a range --------------------

_IDENTITY = frozenset(
    """detach clone contiguous float double half bfloat16 to cpu cuda view reshape flatten
squeeze unsqueeze permute transpose t expand expand_as repeat view_as reshape_as type_as
flip roll narrow select index_select gather masked_select movedim unflatten repeat_interleave
squeeze_ unsqueeze_ detach_ max min amax amin median nanmedian mean nanmean quantile nanquantile
sort msort topk kthvalue cummax cummin mode take take_along_dim diagonal tile broadcast_to
expand_copy chunk split unbind tensor_split hsplit vsplit""".split()
)
_STACK = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"})
_MEANS = frozenset({"mean", "nanmean", "quantile", "nanquantile"})
_WITH_INDICES = frozenset(
    {"max", "min", "median", "nanmedian", "mode", "sort", "topk", "kthvalue", "cummax", "cummin"}
)
_UNIT = {
    "softmax": "softmax",
    "sigmoid": "sigmoid",
    "expit": "sigmoid",
    "softmin": "softmin",
    "hardsigmoid": "hardsigmoid",
    "gumbel_softmax": "gumbel_softmax",
    "rand": "rand",
    "rand_like": "rand",
    "bernoulli": "bernoulli",
    "one_hot": "one_hot",
    "eye": "eye",
    "dropout_mask": "mask",
}
_SYMMETRIC_UNIT = {
    "tanh": "tanh",
    "sin": "sin",
    "cos": "cos",
    "softsign": "softsign",
    "sign": "sign",
    "sgn": "sign",
    "erf": "erf",
}
# norms and distances, and the words a reason uses for each
_NORMS = {
    **dict.fromkeys(
        (
            "norm",
            "vector_norm",
            "matrix_norm",
            "dist",
            "cdist",
            "pairwise_distance",
            "frobenius_norm",
            "nuclear_norm",
            "hypot",
        ),
        "norm",
    ),
    "std": "std",
    "var": "variance",
}
_NONNEG_LOSSES = frozenset(
    {
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "cross_entropy",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "soft_margin_loss",
        "multilabel_soft_margin_loss",
        "hinge_embedding_loss",
    }
)
_NUM_RESULT = frozenset({"numel", "dim", "ndimension", "nelement", "size", "element_size", "__len__"})
_TORCH_ROOTS = ("torch.", "numpy.", "math.", "builtins.", "np.")
CONSTANTS = {
    "math.pi": math.pi,
    "math.e": math.e,
    "math.tau": math.tau,
    "math.inf": INF,
    "numpy.pi": math.pi,
    "numpy.e": math.e,
    "numpy.inf": INF,
    "torch.pi": math.pi,
    "torch.e": math.e,
    "torch.inf": INF,
}
_INT_TYPES = frozenset({"int", "float", "bool"})
# Python types whose methods are not Tensor methods, whatever they are called.
NOT_TENSOR = frozenset({"num", "str", "module", "object", "none"})


@dataclass
class RangeAnalysis:
    """On-demand range facts for the expressions of one module."""

    flow: DataFlow
    resolver: Resolver
    dtype: str = "float32"
    _memo: dict[object, Fact] = field(default_factory=dict)
    _active: set[object] = field(default_factory=set)
    _dumps: dict[int, str] = field(default_factory=dict)
    _depth: int = 0
    _sizes: SizeProofs | None = None
    _provenance: Provenance | None = None

    @property
    def sizes(self) -> SizeProofs:
        """Proofs that a size (len, shape[k], numel) is >= 1 where it is read (built on first use)."""
        if self._sizes is None:
            self._sizes = SizeProofs(self.flow, self.resolver, self)
        return self._sizes

    @property
    def provenance(self) -> Provenance:
        """May a tensor be empty (a sum of positives over no element is 0): built on first use."""
        if self._provenance is None:
            from grist_lsp.analyzer.provenance import Provenance  # provenance reads ranges: no import cycle

            self._provenance = Provenance(self.flow, self.resolver, self)
        return self._provenance

    # --- entry points --------------------------------------------------------

    def fact(self, e: ast.AST | None) -> Fact:
        """The range of an expression (TOP when nothing is known)."""
        if e is None:
            return TOP
        return self._guarded(id(e), self._eval, e)

    def def_fact(self, d: Def) -> Fact:
        """The range of the value a definition binds."""
        return self._guarded(("def", d.key), self._def_fact, d)

    def _guarded(self, key: object, compute: Callable[[_A], Fact], arg: _A) -> Fact:
        got = self._memo.get(key)
        if got is not None:
            return got
        if key in self._active or self._depth > MAX_DEPTH:
            # A cycle (loop-carried redefinition) or a very long chain: no range.
            # The Python type is left open ("cycle") so `total = 0.0; total += v.item()`
            # stays a Python number (the usual optimistic type fixpoint).
            return CYCLE
        self._active.add(key)
        self._depth += 1
        try:
            f = compute(arg)
        except RecursionError:
            return TOP  # not memoised: a shallower query may still succeed
        finally:
            self._depth -= 1
            self._active.discard(key)
        self._memo[key] = f
        return f

    # --- helpers -----------------------------------------------------------------

    def _num(self, v: float, why: str | None = None, pytype: str = "num") -> Fact:
        lo, hi = round_down(v, self.dtype), round_up(v, self.dtype)
        # 1e-50 is not 0, but it is 0 in float32: non-zero only if the dtype keeps it so
        return Fact(lo, hi, lo > 0 or hi < 0, pytype, why if why is not None else fmt(v))

    def _iv(self, lo: float, hi: float, why: str, pytype: str = "unknown", nonzero: bool = False) -> Fact:
        lo, hi = round_down(lo, self.dtype), round_up(hi, self.dtype)
        return Fact(lo, hi, nonzero or lo > 0 or hi < 0, pytype, _short(why))

    def _dump(self, e: ast.AST) -> str:
        key = id(e)
        if key not in self._dumps:
            self._dumps[key] = ast.dump(e)
        return self._dumps[key]

    def same(self, a: ast.AST, b: ast.AST) -> bool:
        """Structurally equal expressions (x and x, d.abs() and d.abs())."""
        if type(a) is not type(b):
            return False
        if isinstance(a, ast.Name) and isinstance(b, ast.Name):
            return a.id == b.id
        if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
            return a.value == b.value and type(a.value) is type(b.value)
        if isinstance(a, ast.Attribute) and isinstance(b, ast.Attribute) and a.attr != b.attr:
            return False
        return self._dump(a) == self._dump(b)

    def _text(self, e: ast.AST) -> str:
        """Short source-like words for an expression (only small ones are unparsed:
        unparsing every prefix of a long chain would be quadratic)."""
        if isinstance(e, ast.expr) and (
            e.end_lineno != e.lineno or (e.end_col_offset or 0) - e.col_offset > 60
        ):
            return "expression"
        try:
            return _short(ast.unparse(e), 40)
        except Exception:  # unparse is best effort on odd trees; words only
            return "expression"

    # --- evaluation ------------------------------------------------------------------

    def _eval(self, e: ast.AST) -> Fact:
        if isinstance(e, ast.Constant):
            v = e.value
            if isinstance(v, bool):
                return Fact(float(v), float(v), v, "num", repr(v))
            if isinstance(v, (int, float)):
                return self._num(float(_safe(float, v, default=INF if v > 0 else -INF)))
            if isinstance(v, (str, bytes)):
                return Fact(pytype="str")
            if v is None:
                return Fact(pytype="none")
            return TOP
        if isinstance(e, ast.JoinedStr):
            return Fact(pytype="str")
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            elts = [self.fact(x) for x in e.elts if not isinstance(x, ast.Starred)]
            if not elts or len(elts) != len(e.elts):
                return Fact(pytype="object")
            return join(elts).with_type("object")
        if isinstance(e, (ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            return Fact(pytype="object")
        if isinstance(e, ast.Name):
            return self._name(e)
        if isinstance(e, ast.Attribute):
            return self._attribute(e)
        if isinstance(e, ast.Subscript):
            return self._subscript(e)
        if isinstance(e, ast.UnaryOp):
            f = self.fact(e.operand)
            if isinstance(e.op, ast.USub):
                return replace(f, lo=-f.hi, hi=-f.lo, why=f"-{f.why}" if f.why else "")
            if isinstance(e.op, ast.UAdd):
                return f
            if isinstance(e.op, ast.Not):
                return Fact(0.0, 1.0, False, "num", "bool")
            return Fact(pytype=f.pytype)
        if isinstance(e, ast.BinOp):
            return self._binop(self.fact(e.left), e.op, self.fact(e.right), e)
        if isinstance(e, ast.BoolOp):
            return join([self.fact(v) for v in e.values])
        if isinstance(e, ast.Compare):
            kinds = {self.fact(x).pytype for x in [e.left, *e.comparators]}
            return Fact(0.0, 1.0, False, "num" if kinds == {"num"} else "unknown", "comparison")
        if isinstance(e, ast.IfExp):
            return join([self.refine(e.body, e.test, True), self.refine(e.orelse, e.test, False)])
        if isinstance(e, ast.NamedExpr):
            return self.fact(e.value)
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.Await):
            return TOP
        return TOP

    def _name(self, e: ast.Name) -> Fact:
        qn = self.resolver.qualified_name(e)
        if qn is not None:
            if qn in CONSTANTS:
                return self._num(CONSTANTS[qn], e.id)
            if qn.startswith("builtins."):
                return Fact(pytype="object")
            return Fact(pytype=_imported_type(qn))
        defs = self.flow.defs_reaching(e)
        if not defs:
            return TOP
        facts = [self.def_fact(d) for d in defs]
        return join(facts)

    def _def_fact(self, d: Def) -> Fact:
        how = d.how
        if how in ("assign", "walrus", "attr"):
            if isinstance(d.value, (ast.List, ast.Set, ast.Dict)):
                # a named mutable container may be appended to anywhere: its elements are unknown
                return Fact(pytype="object")
            return self.fact(d.value)
        if how == "unpack":
            v = d.value
            for i in d.path:
                if (
                    isinstance(v, (ast.Tuple, ast.List))
                    and i < len(v.elts)
                    and not any(isinstance(x, ast.Starred) for x in v.elts)
                ):
                    v = v.elts[i]
                else:
                    return TOP
            return self.fact(v)
        if how == "aug":
            s = d.value
            assert isinstance(s, ast.AugAssign)
            prior = self.fact(s.target) if isinstance(s.target, ast.Name) else TOP
            return self._binop(prior, s.op, self.fact(s.value), s)
        if how == "param":
            return self._param(d)
        if how == "for":
            return self._loop_target(d.value, d.path)
        if how == "import":
            return Fact(pytype="module")
        if how in ("function", "class"):
            return Fact(pytype="object")
        if how == "mutate":
            return self._mutation(d)
        if how == "refine":
            assert d.value is not None, "a refine definition holds its guard"
            prior = join([self.def_fact(p) for p in self.flow.defs_reaching(d.node)])
            return self._apply(prior, d.node, d.value, d.truth)
        return TOP

    def _param(self, d: Def) -> Fact:
        info = self.flow.function_info(d.owner)
        pytype = self._annotation_type(d.annotation)
        if info is None:
            return Fact(pytype=pytype)
        if (
            info.class_node is not None
            and d.param_index == 0
            and self.flow.self_names.get(id(d.owner)) == d.name
        ):
            tensor_class = any(self._is_tensor_base(b) for b in info.class_node.bases)
            return Fact(pytype="tensor" if tensor_class else "object", why="self")
        if info.open_params or info.escapes:
            return Fact(pytype=pytype)
        sources: list[ast.AST] = list(self.flow.param_arguments(d))
        name = getattr(d.owner, "name", "<lambda>")
        # Callers outside this file can pass anything to a public function; a
        # private or nested one is only called from here.
        private = (
            name.startswith("_") and not name.startswith("__") or self._nested(d.owner) or name == "<lambda>"
        )
        if d.value is not None:
            sources.append(d.value)
        elif not private or not sources:
            return Fact(pytype=pytype)
        f = join([self.fact(s) for s in sources])
        if pytype != "unknown" and f.pytype == "unknown":
            f = f.with_type(pytype)
        return f

    def _nested(self, func: ast.AST | None) -> bool:
        qual = self.flow.enclosing.get(id(func)) if func is not None else None
        info = self.flow.function_info(func)
        if qual is None or info is None:
            return False
        return qual.count(".") > (1 if info.class_node is not None else 0)

    def _is_tensor_base(self, b: ast.expr) -> bool:
        qn = self.resolver.qualified_name(b)
        return qn in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter")

    def _annotation_type(self, a: ast.expr | None) -> str:
        if a is None:
            return "unknown"
        if isinstance(a, ast.Name) and a.id in _INT_TYPES:
            return "num"
        if isinstance(a, ast.Name) and a.id == "str":
            return "str"
        qn = self.resolver.qualified_name(a)
        if qn in ("torch.Tensor", "torch.FloatTensor"):
            return "tensor"
        return "unknown"

    def _loop_target(self, it: ast.AST | None, path: tuple[int, ...] = ()) -> Fact:
        qn = self.resolver.qualified_name(it.func) if isinstance(it, ast.Call) else None
        if path:
            if qn == "builtins.enumerate" and path[0] == 0 and len(path) == 1:
                return Fact(0.0, INF, False, "num", "loop index")
            if qn == "builtins.enumerate" and path[0] == 1 and isinstance(it, ast.Call) and it.args:
                return self._loop_target(it.args[0], path[1:])
            if qn == "builtins.zip" and isinstance(it, ast.Call) and path[0] < len(it.args):
                return self._loop_target(it.args[path[0]], path[1:])
            rows = _literal_rows(it)
            if rows and len(path) == 1 and all(len(e.elts) > path[0] for e in rows):
                return join([self.fact(e.elts[path[0]]) for e in rows])
            return TOP
        if isinstance(it, ast.Call) and qn == "builtins.range":
            args = [self.fact(a) for a in it.args]
            if len(args) == 1:
                return Fact(0.0, max(args[0].hi - 1, 0.0), False, "num", "range index")
            if len(args) >= 2:
                lo = min(args[0].lo, args[1].lo)
                hi = max(args[0].hi, args[1].hi)
                return Fact(lo, hi, False, "num", "range index")
            return Fact(pytype="num")
        if isinstance(it, (ast.List, ast.Tuple)):
            return join([self.fact(x) for x in it.elts]) if it.elts else TOP
        return TOP

    def _mutation(self, d: Def) -> Fact:
        node = d.node
        if isinstance(node, ast.Subscript):
            prior = join([self.def_fact(p) for p in self.flow.defs_reaching(node)])
            return join([prior, self.fact(d.value)])
        if not isinstance(node, ast.Call):
            return TOP
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == d.name:
            prior = join([self.def_fact(p) for p in self.flow.defs_reaching(f.value)])
            name = f.attr[:-1]
            if name == "zero":
                return self._num(0.0, "zero_()").with_type("tensor")
            if name == "fill":
                return self._arg_fact(node, 0, "value").with_type("tensor")
            got = self._known_call(name, prior, node, list(node.args), method=True)
            return got if got is not None else TOP
        if node.args and isinstance(node.args[0], ast.Name) and self.resolver.qualified_name(f):
            # torch.clamp_(x, min=...), nn.init.zeros_(w): a library function mutating its argument
            prior = join([self.def_fact(p) for p in self.flow.defs_reaching(node.args[0])])
            name = (self.resolver.qualified_name(f) or "").rsplit(".", 1)[-1][:-1]
            got = self._known_call(name, prior, node, list(node.args[1:]), method=False)
            return got if got is not None else TOP
        return TOP

    def _attribute(self, e: ast.Attribute) -> Fact:
        qn = self.resolver.qualified_name(e)
        if qn is not None:
            if qn in CONSTANTS:
                return self._num(CONSTANTS[qn], qn.split(".")[-1])
            if qn.startswith("torch.") and qn.split(".")[-1] in (
                "float16",
                "float32",
                "float64",
                "bfloat16",
                "half",
                "double",
                "float",
                "long",
                "int",
            ):
                return Fact(pytype="object", why=qn)
            return Fact(pytype=_imported_type(qn))
        if self.flow.is_use(e):  # self.x in a method
            defs = self.flow.defs_reaching(e)
            if not defs:
                return TOP
            f = join([self.def_fact(d) for d in defs])
            return f
        if isinstance(e.value, ast.Call) and self.resolver.qualified_name(e.value.func) in (
            "torch.finfo",
            "numpy.finfo",
        ):
            dtype = self._dtype_arg(e.value)
            if e.attr == "eps":
                v = _MACHINE_EPS.get(dtype, _MACHINE_EPS["float32"])
                return self._num(v, f"finfo({dtype}).eps")
            if e.attr in ("tiny", "smallest_normal"):
                return self._num(dtype_limits(dtype).tiny, f"finfo({dtype}).tiny")
            if e.attr == "max":
                return self._num(dtype_limits(dtype).max, f"finfo({dtype}).max")
            if e.attr == "min":
                return self._num(-dtype_limits(dtype).max, f"finfo({dtype}).min")
            return TOP
        if isinstance(e.value, ast.Name):  # ClassName.CONSTANT of a class in this file
            defs = self.flow.defs_reaching(e.value)
            if len(defs) == 1 and defs[0].how == "class":
                keys = self.flow.class_attrs.get((id(defs[0].value), e.attr), [])
                return join([self.def_fact(self.flow.defs[k]) for k in keys]) if keys else TOP
        if e.attr in ("T", "mT", "H", "mH", "data", "real"):
            return self.fact(e.value)
        if (
            e.attr == "values"
            and isinstance(e.value, ast.Call)
            and self._call_short(e.value) in _WITH_INDICES
        ):
            return self._first_input(e.value)
        if e.attr in ("shape", "dtype", "device"):
            return Fact(pytype="object")
        if e.attr in ("ndim", "itemsize"):
            return Fact(0.0, INF, False, "num", e.attr)
        return TOP

    def _dtype_arg(self, call: ast.Call) -> str:
        arg = call.args[0] if call.args else None
        qn = self.resolver.qualified_name(arg) if arg is not None else None
        if qn:
            return dtype_limits(qn).name
        return self.dtype

    def _subscript(self, e: ast.Subscript) -> Fact:
        v = e.value
        if isinstance(v, ast.Attribute) and v.attr == "shape":
            return self._size(e, "shape")
        if isinstance(v, ast.Call) and self._call_short(v) in _WITH_INDICES and self._has_dim(v):
            s = e.slice
            if isinstance(s, ast.Constant) and s.value == 0:
                return self._first_input(v)
            return TOP
        f = self.fact(v)
        if f.pytype == "str":
            return f
        if f.pytype in ("module", "none"):
            return TOP
        # Boolean-mask indexing selects the elements the mask admits: x[x > 0] > 0.
        s = e.slice
        if isinstance(s, (ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp)):
            f = self.refine(v, s, True)
        return replace(f, pytype="unknown" if f.pytype == "object" else f.pytype)

    # --- operators -------------------------------------------------------------------

    def _binop(self, a: Fact, op: ast.operator, b: Fact, node: ast.AST | None) -> Fact:
        ptype = self._result_type(a, b, op)
        if ptype == "str":
            return Fact(pytype="str")
        why_op = {
            ast.Add: "+",
            ast.Sub: "-",
            ast.Mult: "*",
            ast.Div: "/",
            ast.Pow: "**",
            ast.Mod: "%",
            ast.FloorDiv: "//",
            ast.MatMult: "@",
        }.get(type(op), "?")
        left_why = a.why or (self._text(node.left) if isinstance(node, ast.BinOp) else "?")
        right_why = b.why or (self._text(node.right) if isinstance(node, ast.BinOp) else "?")
        why = f"{_wrap(left_why)} {why_op} {_wrap(right_why)}"
        if isinstance(op, ast.Add):
            return self._iv(_nan_to(a.lo + b.lo, -INF), _nan_to(a.hi + b.hi, INF), why, ptype)
        if isinstance(op, ast.Sub):
            if node is not None and isinstance(node, ast.BinOp) and self.same(node.left, node.right):
                return self._iv(0.0, 0.0, why, ptype)
            if isinstance(node, ast.BinOp) and self._bounds_above(node.right, node.left):
                # x - x.amax(-1, keepdim=True) <= 0 (+-inf in x are an upstream failure)
                return Fact(
                    -INF,
                    min(0.0, _nan_to(a.hi - b.lo, INF)),
                    False,
                    ptype,
                    f"{_wrap(left_why)} minus its maximum",
                )
            return self._iv(_nan_to(a.lo - b.hi, -INF), _nan_to(a.hi - b.lo, INF), why, ptype)
        if isinstance(op, ast.Mult):
            if node is not None and isinstance(node, ast.BinOp) and self.same(node.left, node.right):
                lo, hi = _square(a)
                return self._iv(lo, hi, f"square of {a.why or '?'}", ptype)
            lo, hi = _corners([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
            return self._iv(lo, hi, why, ptype)
        if isinstance(op, ast.Div):
            return self._divide(a, b, why, ptype)
        if isinstance(op, ast.Pow):
            if b.is_point:
                r = pow_interval(a, b.lo)
                if r is not None:
                    return self._iv(r[0], r[1], why, ptype)
            if a.lo > 0 and b.lo > -INF and b.hi < INF:
                # x ** e is monotone in x and in e separately (x > 0): the box's corners bound it
                lo, hi = _corners(
                    [_safe(math.pow, x, e, default=INF) for x in (a.lo, a.hi) for e in (b.lo, b.hi)]
                )
                return self._iv(lo, hi, why, ptype)
            if a.lo >= 1 and b.lo >= 0:
                return self._iv(1.0, INF, why, ptype)
            if a.lo > 0:
                return self._iv(0.0, INF, why, ptype)
            return Fact(pytype=ptype)
        if isinstance(op, ast.Mod):
            if b.lo > 0:  # Python and torch.remainder take the divisor's sign
                return self._iv(0.0, b.hi, why, ptype)
            return Fact(pytype=ptype)
        if isinstance(op, ast.FloorDiv):
            if b.lo > 0 and a.lo >= 0:
                return self._iv(0.0, INF if a.hi == INF else math.floor(a.hi / b.lo), why, ptype)
            return Fact(pytype=ptype)
        return Fact(pytype=ptype)

    def _bounds_above(self, r: ast.AST, x: ast.AST) -> bool:
        """``r`` is at least every element of ``x`` it broadcasts against: x.amax(d, keepdim=True),
        x.max(d, keepdim=True).values / [0], x.max(), x.logsumexp(d, keepdim=True), and
        their .detach(). ``x`` must be a name or self.name (a call could differ between reads)."""
        if not (isinstance(x, ast.Name) or (isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name))):
            return False
        if (
            isinstance(r, ast.Call)
            and isinstance(r.func, ast.Attribute)
            and r.func.attr == "detach"
            and not r.args
        ):
            return self._bounds_above(r.func.value, x)
        tuple_result = False
        if isinstance(r, ast.Attribute) and r.attr == "values":
            r, tuple_result = r.value, True
        elif isinstance(r, ast.Subscript) and isinstance(r.slice, ast.Constant) and r.slice.value == 0:
            r, tuple_result = r.value, True
        if not isinstance(r, ast.Call):
            return False
        short = self._call_short(r)
        if short not in ("amax", "max", "logsumexp"):
            return False
        method = self.resolver.qualified_name(r.func) is None
        if method:
            operand = r.func.value if isinstance(r.func, ast.Attribute) else None
        else:
            operand = r.args[0] if r.args else None
        if operand is None or not self.same(operand, x):
            return False
        rest = r.args if method else r.args[1:]
        kw = {k.arg: k.value for k in r.keywords}
        if not rest and "dim" not in kw:  # a full reduction: one value, the maximum of all
            return short != "logsumexp" and not tuple_result
        keep = kw.get("keepdim", rest[1] if len(rest) > 1 else None)
        if not (isinstance(keep, ast.Constant) and keep.value is True):
            return False
        return tuple_result == (short == "max")

    def _divide(self, a: Fact, b: Fact, why: str, ptype: str) -> Fact:
        if b.lo > 0 or b.hi < 0:
            inv = [
                1.0 / b.lo if b.lo not in (0.0, -INF, INF) else 0.0,
                1.0 / b.hi if b.hi not in (0.0, -INF, INF) else 0.0,
            ]
            lo, hi = _corners([x * y for x in (a.lo, a.hi) for y in inv])
            return self._iv(lo, hi, why, ptype)
        if a.lo >= 0 and b.lo >= 0:
            return self._iv(0.0, INF, why, ptype)
        return Fact(pytype=ptype)

    @staticmethod
    def _result_type(a: Fact, b: Fact, op: ast.operator) -> str:
        if a.pytype == "cycle":
            a = replace(a, pytype=b.pytype)
        if b.pytype == "cycle":
            b = replace(b, pytype=a.pytype)
        if isinstance(op, ast.Mod) and a.pytype == "str":
            return "str"
        if isinstance(op, ast.Add) and a.pytype == "str" and b.pytype == "str":
            return "str"
        if a.pytype == "num" and b.pytype == "num":
            return "num"
        if "tensor" in (a.pytype, b.pytype):
            return "tensor"
        return "unknown"

    # --- guards -------------------------------------------------------------------------

    def refine(self, expr: ast.AST, cond: ast.AST, truth: bool) -> Fact:
        """The range of ``expr`` where ``cond`` is ``truth`` (torch.where, masks, x if c else y)."""
        f = self.fact(expr)
        return self._apply(f, expr, cond, truth)

    def _apply(self, f: Fact, expr: ast.AST, cond: ast.AST, truth: bool) -> Fact:
        """``f`` (the range of ``expr``) narrowed by knowing that ``cond`` is ``truth``."""
        if isinstance(cond, ast.UnaryOp) and isinstance(cond.op, (ast.Not, ast.Invert)):
            return self._apply(f, expr, cond.operand, not truth)
        if (
            isinstance(cond, ast.Call)
            and isinstance(cond.func, ast.Attribute)
            and cond.func.attr in ("logical_not", "bitwise_not")
            and not cond.args
        ):
            return self._apply(f, expr, cond.func.value, not truth)
        parts = _each_holds(cond, truth)
        if parts is not None:
            for p in parts:
                f = self._apply(f, expr, p, truth)
            return f
        if isinstance(cond, ast.Call) and not cond.keywords:
            # (d > 0).all() true, or (d <= 0).any() false: every element satisfies it
            inner = None
            if isinstance(cond.func, ast.Attribute) and cond.func.attr in ("all", "any") and not cond.args:
                inner = cond.func.value
            elif len(cond.args) == 1 and self._call_short(cond) in ("all", "any"):
                inner = cond.args[0]
            every = self._call_short(cond) == "all"
            if inner is not None and truth == every:
                return self._apply(f, expr, inner, truth)
            return f
        if not isinstance(cond, ast.Compare) or len(cond.ops) != 1:
            return f
        return self._apply_comparison(f, expr, cond, truth)

    def _apply_comparison(self, f: Fact, expr: ast.AST, cond: ast.Compare, truth: bool) -> Fact:
        """``f`` narrowed by a comparison of ``expr`` (or of its min, max or abs) with a value."""
        left, op, right = cond.left, cond.ops[0], cond.comparators[0]
        if type(op) not in _FLIPPED:
            return f
        if self.same(right, expr) and not self.same(left, expr):
            left, right, op = right, left, _FLIPPED[type(op)]()
        if self.same(left, expr):
            c = self.fact(right)
            return self._constrain(f, type(op), c, truth, f"guarded by {self._text(cond)}")
        # d.min() > c bounds every element from below, d.max() < c from above
        reduced = self._reduction_of(left, expr)
        if reduced is None:
            reduced = self._reduction_of(right, expr)
            if reduced is not None:
                left, right, op = right, left, _FLIPPED[type(op)]()
        if reduced is not None:
            holds = type(op) if truth else _NEGATED[type(op)]
            c = self.fact(right)
            return self._bound_by_reduction(f, reduced, holds, c, f"guarded by {self._text(cond)}")
        # |x| > c with c >= 0 says x != 0
        if self._is_abs_of(left, expr) and isinstance(op, (ast.Gt, ast.GtE)) and truth:
            c = self.fact(right)
            if c.lo > 0 or (isinstance(op, ast.Gt) and c.lo >= 0):
                return replace(f, nonzero=True, why=f"guarded by {self._text(cond)}")
        return f

    def _bound_by_reduction(self, f: Fact, reduced: tuple[str, bool], holds: type, c: Fact, why: str) -> Fact:
        """``f`` where ``min(expr) holds c`` or ``max(expr) holds c`` (through abs or not)."""
        kind, through_abs = reduced
        if kind == "min" and holds in (ast.Gt, ast.GtE):
            if through_abs:
                excludes_zero = c.lo > 0 or (holds is ast.Gt and c.lo >= 0)
                return replace(f, nonzero=True, why=why) if excludes_zero else f
            return self._constrain(f, holds, c, True, why)
        if kind == "max" and holds in (ast.Lt, ast.LtE) and not through_abs:
            return self._constrain(f, holds, c, True, why)
        return f

    def _reduction_of(self, e: ast.AST, expr: ast.AST) -> tuple[str, bool] | None:
        """("min"|"max", through abs) when ``e`` is expr.min(), torch.amax(expr), expr.abs().min() ..."""
        if not isinstance(e, ast.Call) or e.keywords:
            return None
        short = self._call_short(e)
        kind = {"min": "min", "amin": "min", "max": "max", "amax": "max"}.get(short or "")
        if kind is None:
            return None
        if isinstance(e.func, ast.Attribute) and not e.args and self.resolver.qualified_name(e.func) is None:
            arg = e.func.value
        elif len(e.args) == 1 and self.resolver.qualified_name(e.func) is not None:
            arg = e.args[0]
        else:
            return None  # a reduction along a dim, or min(x, y): not every element
        if self.same(arg, expr):
            return kind, False
        if self._is_abs_of(arg, expr):
            return kind, True
        return None

    def _is_abs_of(self, e: ast.AST, expr: ast.AST) -> bool:
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Attribute)
            and e.func.attr == "abs"
            and not e.args
        ):
            return self.same(e.func.value, expr)
        if isinstance(e, ast.Call) and len(e.args) == 1 and self._call_short(e) in ("abs", "absolute"):
            return self.same(e.args[0], expr)
        return False

    @staticmethod
    def _constrain(f: Fact, op: type, c: Fact, truth: bool, why: str) -> Fact:
        lo, hi, nz = f.lo, f.hi, f.nonzero
        if not truth:
            op = {
                ast.Gt: ast.LtE,
                ast.GtE: ast.Lt,
                ast.Lt: ast.GtE,
                ast.LtE: ast.Gt,
                ast.Eq: ast.NotEq,
                ast.NotEq: ast.Eq,
            }[op]
        if op in (ast.Gt, ast.GtE):
            lo = max(lo, c.lo)
            nz = nz or c.lo > 0 or (op is ast.Gt and c.lo >= 0)
        elif op in (ast.Lt, ast.LtE):
            hi = min(hi, c.hi)
            nz = nz or c.hi < 0 or (op is ast.Lt and c.hi <= 0)
        elif op is ast.Eq:
            lo, hi = max(lo, c.lo), min(hi, c.hi)
        elif op is ast.NotEq:
            nz = nz or (c.lo == 0.0 and c.hi == 0.0)
        if lo > hi:
            return BOTTOM
        return Fact(lo, hi, nz, f.pytype, why)

    # --- calls ------------------------------------------------------------------------------

    def method_receiver(self, call: ast.Call) -> ast.expr | None:
        """The receiver of ``call`` when it may be a Tensor method call (``x.log()``), else None.

        A method's name says what it computes only if the receiver may be a tensor:
        not when the receiver is known to be something else (``self`` of an
        nn.Module, an instance, a module, a number), and not when ``recv.name``
        is itself a value assigned somewhere (``self.var = nn.Linear(8, 4)``,
        ``self.norm = nn.LayerNorm(4)``, ``self.f = some_function``): calling it
        runs that module or function, whatever its name.
        """
        f = call.func
        if not isinstance(f, ast.Attribute) or self.resolver.qualified_name(f) is not None:
            return None
        if self.flow.is_use(f) and self.flow.defs_reaching(f):
            return None
        if self.fact(f.value).pytype in NOT_TENSOR:
            return None
        return f.value

    def _call_short(self, call: ast.Call) -> str | None:
        """The last name of a torch/numpy/math/builtin function or of a Tensor method."""
        qn = self.resolver.qualified_name(call.func)
        if qn is not None:
            return qn.rsplit(".", 1)[-1] if qn.startswith(_TORCH_ROOTS) else None
        if self.method_receiver(call) is not None and isinstance(call.func, ast.Attribute):
            return call.func.attr
        return None

    def _has_dim(self, call: ast.Call) -> bool:
        qn = self.resolver.qualified_name(call.func)
        method = qn is None
        extra = call.args if method else call.args[1:]
        if any(k.arg == "dim" for k in call.keywords):
            return True
        return bool(extra) and self.fact(extra[0]).pytype == "num"

    def _first_input(self, call: ast.Call) -> Fact:
        qn = self.resolver.qualified_name(call.func)
        if qn is None and isinstance(call.func, ast.Attribute):
            return self.fact(call.func.value)
        return self.fact(call.args[0]) if call.args else TOP

    def _arg(self, call: ast.Call, index: int, keyword: str | None) -> ast.expr | None:
        if keyword is not None:
            for k in call.keywords:
                if k.arg == keyword:
                    return k.value
        if 0 <= index < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[: index + 1]
        ):
            return call.args[index]
        return None

    def _arg_fact(self, call: ast.Call, index: int, keyword: str | None) -> Fact:
        a = self._arg(call, index, keyword)
        return self.fact(a) if a is not None else TOP

    def _call(self, e: ast.Call) -> Fact:
        callee = self.flow.callee(e)
        if callee is not None:
            if getattr(callee, "name", None) == "__init__":
                return Fact(pytype="object", why="instance")
            rets = self.flow.returns_of(callee)
            return join([self.fact(r) for r in rets], None) if rets else Fact(pytype="none")
        qn = self.resolver.qualified_name(e.func)
        if qn is not None:
            if qn.startswith(_TORCH_ROOTS):
                short = qn.rsplit(".", 1)[-1]
                root = qn.split(".")[0]
                if any(
                    k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                    for k in e.keywords
                ):
                    return Fact(
                        pytype="tensor", why="a trainable tensor"
                    )  # an optimizer may move it anywhere
                if short in (
                    "Tensor",
                    "FloatTensor",
                    "DoubleTensor",
                    "HalfTensor",
                    "BFloat16Tensor",
                    "tensor",
                    "as_tensor",
                    "from_numpy",
                    "asarray",
                    "array",
                ) and root in ("torch", "numpy"):
                    return self._arg_fact(e, 0, "data").with_type("tensor")
                args = list(e.args[1:])
                inp = self._arg_fact(e, 0, "input") if e.args or e.keywords else TOP
                got = self._known_call(short, inp, e, args, method=False, root=root)
                if got is not None:
                    if root in ("math",) or (
                        root == "builtins"
                        and got.pytype == "unknown"
                        and inp.pytype == "num"
                        and short in ("abs", "max", "min", "round", "sum", "pow")
                    ):
                        return got.with_type("num")
                    return got
                if root == "builtins":
                    if short in ("int", "float", "len", "round", "bool"):
                        return Fact(pytype="num")
                    if short in ("str", "repr", "format"):
                        return Fact(pytype="str")
                    return Fact(pytype="object")
                if short in ("Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"):
                    return Fact(pytype="tensor", why="a trainable tensor")
                if short[:1].isupper():
                    return Fact(pytype="object")  # a class: nn.Linear(...), torch.Size(...), np.Generator
                return Fact(pytype="tensor" if root == "torch" else "unknown")
            return TOP  # some other library's function
        if isinstance(e.func, ast.Attribute):
            recv = self.fact(e.func.value)
            if recv.pytype == "str":
                return Fact(pytype="str")
            if self.method_receiver(e) is None:
                # Not a Tensor method: sizes and counts (x.shape.numel()) are numbers on
                # any object; anything else (self.var(h) with self.var an nn.Linear) is unknown.
                bound = self.flow.is_use(e.func) and self.flow.defs_reaching(e.func)
                if e.func.attr in _NUM_RESULT and not bound:
                    return self._size(e, e.func.attr)
                return TOP
            got = self._known_call(e.func.attr, recv, e, list(e.args), method=True)
            return got if got is not None else TOP
        return TOP

    def _known_call(
        self, name: str, inp: Fact, call: ast.Call, args: list[ast.expr], *, method: bool, root: str = "torch"
    ) -> Fact | None:
        """Transfer function of a known torch function/method by its short name, else None.

        ``inp`` is the range of the tensor operated on (the receiver of a method,
        the first argument of a function); ``args`` are the remaining positional
        arguments.
        """
        if root == "builtins":
            return self._builtin_call(name, inp, call)
        if root == "math":
            T = "num"
        elif method:
            T = "tensor" if inp.pytype == "tensor" else "unknown"
        else:
            T = "tensor"
        transfer = TRANSFERS.get(name)
        if transfer is not None:
            got = transfer(CallSite(self, name, inp, call, args, method, T))
            if got is not None:
                return got
        if name.endswith("_") and not name.startswith("_"):  # x.sqrt_() returns what x.sqrt() does
            return self._known_call(name[:-1], inp, call, args, method=method, root=root)
        return None

    def _builtin_call(self, name: str, inp: Fact, call: ast.Call) -> Fact | None:
        """abs, max, min, float, int, len, sum, pow of Python's builtins."""
        if name == "abs":
            return self._abs(inp, inp.pytype)
        if name in ("max", "min") and len(call.args) >= 2:
            facts = [self.fact(a) for a in call.args]
            pick = max if name == "max" else min
            f = Fact(
                pick(x.lo for x in facts),
                pick(x.hi for x in facts),
                False,
                "num" if all(x.pytype == "num" for x in facts) else "unknown",
                f"{name}({', '.join(x.why or '?' for x in facts)})",
            )
            return replace(f, nonzero=f.lo > 0 or f.hi < 0)
        if name in ("max", "min") and len(call.args) == 1:
            return replace(self.fact(call.args[0]), pytype="unknown")
        if (
            name in ("float", "int")
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            v = _safe(float, call.args[0].value)
            return self._num(v) if not math.isnan(v) else Fact(pytype="num")
        if name in ("float", "int"):
            return replace(inp, pytype="num")
        if name == "len":
            return self._size(call, "len")
        if name == "sum":
            return self._sum(inp, "unknown")
        if name == "pow" and len(call.args) == 2:
            return self._binop(inp, ast.Pow(), self.fact(call.args[1]), None)
        return None

    def _size(self, e: ast.AST, words: str) -> Fact:
        """A size (len, shape[k], size(k), numel): >= 1 where the program proved it, else >= 0."""
        proof = self.sizes.at_least_one(e)
        if proof is not None:
            return Fact(1.0, INF, True, "num", f"{words} >= 1, {proof}")
        return Fact(0.0, INF, False, "num", words)

    def _abs(self, inp: Fact, T: str) -> Fact:
        if inp.lo >= 0:
            lo, hi = inp.lo, inp.hi
        elif inp.hi <= 0:
            lo, hi = -inp.hi, -inp.lo
        else:
            lo, hi = 0.0, max(-inp.lo, inp.hi)
        return Fact(lo, hi, inp.nonzero or lo > 0, T, f"abs of {inp.why}" if inp.why else "abs")

    def _sum(self, inp: Fact, T: str) -> Fact:
        # an empty sum is 0, so even a positive range only gives >= 0
        if inp.lo >= 0:
            return Fact(0.0, INF, False, T, f"sum of {inp.why or 'non-negative values'}")
        if inp.hi <= 0:
            return Fact(-INF, 0.0, False, T, "sum of non-positive values")
        return Fact(pytype=T)

    def _clamp(self, inp: Fact, lo_c: Fact | None, hi_c: Fact | None, T: str, name: str) -> Fact:
        lo, hi = inp.lo, inp.hi
        parts = []
        # clamp(x, a, b) == min(max(x, a), b), bound by bound
        if lo_c is not None:
            lo, hi = max(lo, lo_c.lo), max(hi, lo_c.hi)
            parts.append(f"min={lo_c.why or '?'}")
        if hi_c is not None:
            lo, hi = min(lo, hi_c.lo), min(hi, hi_c.hi)
            parts.append(f"max={hi_c.why or '?'}")
        nz = (lo > 0 or hi < 0) or (
            inp.nonzero and (lo_c is None or lo_c.hi <= 0) and (hi_c is None or hi_c.lo >= 0)
        )
        return Fact(lo, hi, nz, T, f"{name}({', '.join(parts)})")


# The comparison seen from the other side (a < b is b > a), and its negation (not a < b is a >= b).
_FLIPPED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Gt: ast.Lt,
    ast.Lt: ast.Gt,
    ast.GtE: ast.LtE,
    ast.LtE: ast.GtE,
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
}
_NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Gt: ast.LtE,
    ast.GtE: ast.Lt,
    ast.Lt: ast.GtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


def _each_holds(cond: ast.AST, truth: bool) -> list[ast.expr] | None:
    """The parts of ``cond`` that each have the value ``truth`` when ``cond`` does: the operands
    of ``a & b`` / ``a and b`` when true, of ``a | b`` / ``a or b`` when false; else None."""
    if truth and isinstance(cond, ast.BinOp) and isinstance(cond.op, ast.BitAnd):
        return [cond.left, cond.right]
    if truth and isinstance(cond, ast.BoolOp) and isinstance(cond.op, ast.And):
        return list(cond.values)
    if not truth and isinstance(cond, ast.BinOp) and isinstance(cond.op, ast.BitOr):
        return [cond.left, cond.right]
    if not truth and isinstance(cond, ast.BoolOp) and isinstance(cond.op, ast.Or):
        return list(cond.values)
    return None


def _literal_rows(e: ast.AST | None) -> list[ast.Tuple | ast.List] | None:
    """The rows of a literal list or tuple whose every element is a list or tuple, else None."""
    if not isinstance(e, (ast.List, ast.Tuple)):
        return None
    rows = [r for r in e.elts if isinstance(r, (ast.Tuple, ast.List))]
    return rows if len(rows) == len(e.elts) else None


def _imported_type(qualified: str) -> str:
    """torch/numpy/math names are modules or functions; other imports (``from config
    import EPS``) may be plain numbers, so nothing is known."""
    return "module" if qualified.split(".")[0] in ("torch", "numpy", "math") else "unknown"


def _wrap(why: str) -> str:
    """Parenthesise a compound description inside a larger one."""
    return f"({why})" if " " in why and not (why.startswith("(") and why.endswith(")")) else why


def _nan_to(v: float, default: float) -> float:
    return default if math.isnan(v) else v


# --- transfer functions of library calls, one per family, keyed by short name ----------


@dataclass(frozen=True)
class CallSite:
    """What a transfer function sees of one call of a torch function or Tensor method.

    ``inp`` is the range of the tensor operated on (the receiver of a method, the
    first argument of a function); ``args`` the remaining positional arguments.
    """

    ranges: RangeAnalysis
    name: str
    inp: Fact
    call: ast.Call
    args: list[ast.expr]
    method: bool
    T: str  # the result's Python type

    def arg(self, i: int, key: str | None) -> ast.expr | None:
        for k in self.call.keywords:
            if key is not None and k.arg == key:
                return k.value
        return self.args[i] if i < len(self.args) and not isinstance(self.args[i], ast.Starred) else None

    def input_expr(self) -> ast.expr | None:
        """The expression of the tensor operated on."""
        if self.method and isinstance(self.call.func, ast.Attribute):
            return self.call.func.value
        return self.ranges._arg(self.call, 0, "input")


def _data(c: CallSite) -> Fact | None:
    """t.new_tensor(data) and torch.scalar_tensor(s), twins of torch.tensor(data): the data's range."""
    data = c.arg(0, "data") if c.method else c.input_expr()
    if data is None:
        return None
    f = c.ranges.fact(data)
    return Fact(f.lo, f.hi, f.nonzero, "tensor", f"tensor of {f.why}" if f.why else "tensor")


def _extreme(c: CallSite) -> Fact | None:
    """maximum/minimum/fmax/fmin, and max/min given a second tensor: elementwise.

    ``torch.max(a, 1)`` reduces along a dimension instead; when the second
    argument may be either (its type is unknown) the range covers both readings.
    None defers to the reductions (``x.max()``, ``x.max(dim)``).
    """
    pick = max if c.name in ("max", "maximum", "fmax") else min
    other_expr = c.arg(0, "other")
    if other_expr is None or any(k.arg == "dim" for k in c.call.keywords):
        return None
    other = c.ranges.fact(other_expr)
    if c.name in ("max", "min") and other.pytype in ("num", "bottom"):
        return None
    lo, hi = pick(c.inp.lo, other.lo), pick(c.inp.hi, other.hi)
    if c.name in ("max", "min") and other.pytype != "tensor":
        lo, hi = min(lo, c.inp.lo), max(hi, c.inp.hi)  # or a reduction along dimension `other`
    return Fact(lo, hi, lo > 0 or hi < 0, c.T, f"{c.name}({c.inp.why or '?'}, {other.why or '?'})")


def _sum(c: CallSite) -> Fact | None:
    """sum/cumsum: of values >= lo > 0, at least lo when there is an element to add.

    A float sum of positives is at least its largest term (rounding is monotone),
    and a tensor has an element unless it comes from a selection that may be
    empty (provenance.py's rule, the one the mean kind uses).
    """
    if c.inp.lo > 0 and c.ranges.provenance.may_be_empty(c.input_expr()) is None:
        return Fact(c.inp.lo, INF, True, c.T, f"sum of {c.inp.why or 'positive values'}, not empty")
    if c.inp.hi < 0 and c.ranges.provenance.may_be_empty(c.input_expr()) is None:
        return Fact(-INF, c.inp.hi, True, c.T, "sum of negative values, not empty")
    return c.ranges._sum(c.inp, c.T)


_EXP = {"exp": math.exp, "exp2": lambda v: 2.0**v, "expm1": math.expm1}
_LOG = {"log": math.log, "log2": math.log2, "log10": math.log10, "log1p": math.log1p}


def _exponential(c: CallSite) -> Fact:
    """exp, exp2, expm1 (torch and math): monotone, from 0 (-1 for expm1) up."""
    inp, base = c.inp, _EXP[c.name]
    lo = (
        _safe(base, inp.lo, default=0.0 if inp.lo < 0 else INF)
        if inp.lo != -INF
        else (-1.0 if c.name == "expm1" else 0.0)
    )
    hi = _safe(base, inp.hi, default=INF) if inp.hi != INF else INF
    return c.ranges._iv(lo, hi, f"{c.name} of {inp.why or 'a value'}", c.T)


def _logarithm(c: CallSite) -> Fact:
    """log, log2, log10, log1p (torch and math): monotone where defined."""
    inp, fn = c.inp, _LOG[c.name]
    shift = 1.0 if c.name == "log1p" else 0.0
    lo = _safe(fn, inp.lo, default=-INF) if inp.lo + shift > 0 else -INF
    hi = _safe(fn, inp.hi, default=INF) if inp.hi + shift > 0 else -INF
    if inp.hi == INF:
        hi = INF
    if hi == -INF:
        return Fact(pytype=c.T)
    return c.ranges._iv(lo, hi, f"{c.name} of {inp.why or 'a value'}", c.T)


def _root(c: CallSite) -> Fact:
    """sqrt and rsqrt."""
    inp = c.inp
    if c.name == "sqrt":
        hi = math.sqrt(inp.hi) if inp.hi > 0 else 0.0
        lo = math.sqrt(inp.lo) if inp.lo > 0 else 0.0
        return c.ranges._iv(lo, hi, f"sqrt of {inp.why or 'a value'}", c.T, nonzero=inp.lo > 0)
    if inp.lo > 0:
        return c.ranges._iv(
            1.0 / math.sqrt(inp.hi) if inp.hi != INF else 0.0, 1.0 / math.sqrt(inp.lo), "rsqrt", c.T
        )
    return Fact(0.0, INF, False, c.T, "rsqrt")


def _magnitude(c: CallSite) -> Fact:
    """abs and square."""
    if c.name == "square":
        lo, hi = _square(c.inp)
        return c.ranges._iv(lo, hi, f"square of {c.inp.why or 'a value'}", c.T)
    return c.ranges._abs(c.inp, c.T)


def _bounded(c: CallSite) -> Fact:
    """clamp/clip (and in place), clamp_min, clamp_max, hardtanh: bound by bound."""
    r, name = c.ranges, c.name.rstrip("_")

    def bound(i: int, key: str, default: Fact | None) -> Fact | None:
        e = c.arg(i, key)
        return r.fact(e) if e is not None else default

    if name == "hardtanh":
        return r._clamp(c.inp, bound(0, "min_val", r._num(-1.0)), bound(1, "max_val", r._num(1.0)), c.T, name)
    if name == "clamp_min":
        return r._clamp(c.inp, bound(0, "min", TOP), None, c.T, name)
    if name == "clamp_max":
        return r._clamp(c.inp, None, bound(0, "max", TOP), c.T, name)
    return r._clamp(c.inp, bound(0, "min", None), bound(1, "max", None), c.T, "clamp")


def _activation(c: CallSite) -> Fact:
    """relu, relu6, threshold, softplus and the smooth ReLUs (elu, gelu, silu ...)."""
    inp, T, name = c.inp, c.T, c.name
    if name in ("relu", "relu_", "relu6", "threshold"):
        top = 6.0 if name == "relu6" else INF
        return Fact(max(inp.lo, 0.0), min(max(inp.hi, 0.0), top), inp.lo > 0, T, "relu output")
    if name == "softplus":
        return Fact(0.0, INF, False, T, "softplus output")
    if inp.lo >= 0:
        return Fact(0.0, INF, False, T, f"{name} output")
    if (
        name in ("gelu", "silu", "mish", "hardswish", "elu", "celu")
        and not c.call.args[1:]
        and not c.call.keywords
    ):
        return Fact(-1.0, INF, False, T, f"{name} output")
    return Fact(pytype=T)


def _select(c: CallSite) -> Fact:
    """torch.where, masked_fill: each side refined by the condition that picks it; nan_to_num."""
    r, call = c.ranges, c.call
    if c.name == "nan_to_num":
        if c.args or call.keywords:  # custom replacements can be anything
            return Fact(pytype=c.T)
        return join([c.inp, r._num(0.0)]).with_type(c.T)
    if c.name == "where":
        if c.method:  # x.where(cond, y) == torch.where(cond, x, y)
            cond, a_expr, b_expr = c.arg(0, "condition"), c.input_expr(), c.arg(1, "other")
        else:
            cond = r._arg(call, 0, "condition")
            a_expr, b_expr = r._arg(call, 1, "input"), r._arg(call, 2, "other")
        if cond is None or a_expr is None or b_expr is None:
            return Fact(pytype=c.T)
        f = join([r.refine(a_expr, cond, True), r.refine(b_expr, cond, False)])
        return replace(f, pytype="tensor", why=f"torch.where({r._text(cond)}, ...)")
    mask, value = c.arg(0, "mask"), c.arg(1, "value")
    recv = c.input_expr()
    kept = r.refine(recv, mask, False) if (recv is not None and mask is not None) else c.inp
    f = join([kept, r.fact(value) if value is not None else TOP])
    return replace(f, pytype="tensor", why=f"masked_fill with {r.fact(value).why or '?'}")


def _factory(c: CallSite) -> Fact:
    """ones/zeros/full (and _like, new_), arange, linspace, randint: the values they are made of."""
    r, call, name = c.ranges, c.call, c.name
    if name in ("ones", "ones_like", "new_ones"):
        return r._num(1.0, "ones", "tensor")
    if name in ("zeros", "zeros_like", "new_zeros"):
        return r._num(0.0, "zeros", "tensor")
    if name in ("full", "full_like", "new_full"):
        v = r._arg(call, 1, "fill_value") if not c.method else c.arg(1, "fill_value")
        return replace(r.fact(v), pytype="tensor", why="full") if v is not None else Fact(pytype=c.T)
    if name == "arange" and not c.method:
        nums = [r.fact(a) for a in call.args[:2]]
        if len(nums) == 1:
            return Fact(min(0.0, nums[0].lo), max(nums[0].hi, 0.0), False, "tensor", "arange")
        if len(nums) == 2:
            return Fact(min(nums[0].lo, nums[1].lo), max(nums[0].hi, nums[1].hi), False, "tensor", "arange")
        return Fact(pytype="tensor")
    if name == "linspace" and not c.method and len(call.args) >= 2:
        a, b = r.fact(call.args[0]), r.fact(call.args[1])
        return Fact(min(a.lo, b.lo), max(a.hi, b.hi), False, "tensor", "linspace")
    if name in ("randint", "randint_like"):
        ints = [
            r.fact(a)
            for a in call.args[(1 if c.method or name == "randint_like" else 0) :]
            if r.fact(a).pytype == "num"
        ][:2]
        if len(ints) == 1:
            return Fact(0.0, max(ints[0].hi - 1, 0.0), False, "tensor", "randint")
        if len(ints) == 2:
            return Fact(ints[0].lo, max(ints[1].hi - 1, ints[0].lo), False, "tensor", "randint")
        return Fact(pytype="tensor")
    return Fact(pytype=c.T)  # a method form the family has no rule for (x.arange does not exist)


_ARITHMETIC = {
    "pow": ast.Pow(),
    "float_power": ast.Pow(),
    "mul": ast.Mult(),
    "multiply": ast.Mult(),
    "add": ast.Add(),
    "sub": ast.Sub(),
    "subtract": ast.Sub(),
    "div": ast.Div(),
    "divide": ast.Div(),
    "true_divide": ast.Div(),
}


def _arithmetic(c: CallSite) -> Fact | None:
    """pow, mul, add, sub, div (function and method forms) as their operators; neg; reciprocal."""
    r, inp, T = c.ranges, c.inp, c.T
    if c.name in ("neg", "negative"):
        return replace(inp, lo=-inp.hi, hi=-inp.lo, pytype=T)
    if c.name == "reciprocal":
        return r._divide(r._num(1.0), inp, f"1 / {inp.why or '?'}", T)
    keywords = {k.arg for k in c.call.keywords}
    if "alpha" in keywords or "rounding_mode" in keywords:
        return None  # x.add(y, alpha=a), x.div(y, rounding_mode=...): not the plain operator
    op = _ARITHMETIC[c.name]
    other = c.arg(0, "exponent" if isinstance(op, ast.Pow) else "other")
    if other is None:
        return Fact(pytype=T) if isinstance(op, ast.Pow) else r._binop(inp, op, TOP, None).with_type(T)
    return r._binop(inp, op, r.fact(other), None).with_type(T)


def _same_values(c: CallSite) -> Fact:
    """Moves, copies, views, casts, selections: the values of the tensor operated on."""
    return replace(c.inp, pytype=c.T if c.inp.pytype != "bottom" else c.inp.pytype)


def _order_statistic(c: CallSite) -> Fact:
    """max/min/median/sort/topk...: one of the values, or (values, indices) along a dimension."""
    if c.ranges._has_dim(c.call):
        return Fact(pytype="object")  # (values, indices): see _subscript
    return _same_values(c)


def _extreme_or_order_statistic(c: CallSite) -> Fact:
    """max/min: elementwise against a second tensor, else a reduction."""
    got = _extreme(c)
    return got if got is not None else _order_statistic(c)


def _mean(c: CallSite) -> Fact:
    """mean, nanmean, quantile: within the values, up to rounding."""
    inp = c.inp
    # a computed mean can land an ulp outside its inputs' range
    lo = inp.lo - abs(inp.lo) * 1e-6
    hi = inp.hi + abs(inp.hi) * 1e-6
    return Fact(lo, hi, lo > 0 or hi < 0, c.T, f"mean of {inp.why}" if inp.why else "mean")


def _stacked(c: CallSite) -> Fact:
    """cat/stack of a sequence of tensors: the sequence's range."""
    seq = c.ranges._arg(c.call, -1 if c.method else 0, "tensors")
    if c.method or seq is None:
        return TOP
    return replace(c.ranges.fact(seq), pytype="tensor")


def _unit_interval(c: CallSite) -> Fact:
    """softmax, sigmoid, rand, masks...: in [0, 1]."""
    return Fact(0.0, 1.0, False, c.T, f"{_UNIT[c.name]} output")


def _symmetric_unit(c: CallSite) -> Fact:
    """tanh, sin, cos, sign, erf...: in [-1, 1]; nonzero where the input is and zero maps to zero."""
    inp, name = c.inp, c.name
    if name in ("sin", "cos") and (inp.lo == -INF or inp.hi == INF):
        return Fact(-1.0, 1.0, False, c.T, f"{name} output")  # sin(inf) is NaN: upstream's NaN
    nonzero = inp.nonzero and name in ("tanh", "sign", "softsign", "erf")
    return Fact(-1.0, 1.0, nonzero, c.T, f"{_SYMMETRIC_UNIT[name]} output")


def _norm(c: CallSite) -> Fact:
    """Norms, distances, std, var: non-negative."""
    return Fact(0.0, INF, False, c.T, _NORMS[c.name])


_UNIT_VECTORS = {
    "normalize": "F.normalize output (|x| <= 1 up to rounding)",
    "cosine_similarity": "cosine similarity (can exceed 1 by rounding)",
}


def _unit_vector(c: CallSite) -> Fact:
    """F.normalize and cosine similarity: within +-1 up to rounding."""
    return Fact(-1.0 - UNIT_SLOP, 1.0 + UNIT_SLOP, False, c.T, _UNIT_VECTORS[c.name])


def _zero_filled(c: CallSite) -> Fact:
    """triu, tril, diag...: the values, and the zeros that fill the rest."""
    return join([c.inp, c.ranges._num(0.0)]).with_type(c.T)


def _nan_sum(c: CallSite) -> Fact:
    """nansum: a sum that may skip every element."""
    return c.ranges._sum(c.inp, c.T)


def _product(c: CallSite) -> Fact:
    """prod, cumprod: non-negative when every factor is."""
    return Fact(0.0, INF, False, c.T, "product") if c.inp.lo >= 0 else Fact(pytype=c.T)


def _to_python(c: CallSite) -> Fact:
    """item (a number) and tolist (a list): the tensor's values."""
    return replace(c.inp, pytype="num" if c.name == "item" else "object")


def _size_of(c: CallSite) -> Fact:
    """numel, dim, size...: see RangeAnalysis._size."""
    return c.ranges._size(c.call, c.name)


def _rounded(c: CallSite) -> Fact:
    """floor, ceil, round, trunc: the range widened to whole numbers."""
    inp = c.inp
    lo = math.floor(inp.lo) if inp.lo not in (-INF, INF) else inp.lo
    hi = math.ceil(inp.hi) if inp.hi not in (-INF, INF) else inp.hi
    return Fact(float(lo), float(hi), False, c.T, c.name)


def _logsumexp(c: CallSite) -> Fact:
    """logsumexp: at least the largest value."""
    return Fact(c.inp.lo, INF, False, c.T, "logsumexp")


def _log_probability(c: CallSite) -> Fact:
    """log_softmax, logsigmoid: at most 0."""
    return Fact(-INF, 0.0, False, c.T, f"{c.name} output")


def _loss(c: CallSite) -> Fact:
    """Losses that are never negative."""
    return Fact(0.0, INF, False, c.T, c.name)


def _dropout(c: CallSite) -> Fact:
    """Dropout zeroes and scales up: non-negative stays non-negative."""
    if c.inp.lo >= 0:
        return Fact(0.0, INF, False, c.T, "dropout of a non-negative value")
    return Fact(pytype=c.T)


TRANSFERS: dict[str, Callable[[CallSite], Fact | None]] = {
    **dict.fromkeys(("new_tensor", "scalar_tensor"), _data),
    **dict.fromkeys(("maximum", "minimum", "fmax", "fmin"), _extreme),
    **dict.fromkeys(("sum", "cumsum"), _sum),
    **dict.fromkeys(_EXP, _exponential),
    **dict.fromkeys(_LOG, _logarithm),
    **dict.fromkeys(("sqrt", "rsqrt"), _root),
    **dict.fromkeys(("abs", "absolute", "fabs", "square"), _magnitude),
    **dict.fromkeys(
        (
            "clamp",
            "clip",
            "clamp_",
            "clip_",
            "clamp_min",
            "clamp_min_",
            "clamp_max",
            "clamp_max_",
            "hardtanh",
        ),
        _bounded,
    ),
    **dict.fromkeys(
        (
            "relu",
            "relu_",
            "relu6",
            "threshold",
            "softplus",
            "elu",
            "selu",
            "celu",
            "gelu",
            "silu",
            "mish",
            "hardswish",
            "leaky_relu",
            "prelu",
            "rrelu",
        ),
        _activation,
    ),
    **dict.fromkeys(("where", "masked_fill", "masked_fill_", "nan_to_num"), _select),
    **dict.fromkeys(
        (
            "ones",
            "ones_like",
            "new_ones",
            "zeros",
            "zeros_like",
            "new_zeros",
            "full",
            "full_like",
            "new_full",
            "arange",
            "linspace",
            "randint",
            "randint_like",
        ),
        _factory,
    ),
    **dict.fromkeys((*_ARITHMETIC, "neg", "negative", "reciprocal"), _arithmetic),
    **dict.fromkeys(_IDENTITY - _WITH_INDICES - _MEANS, _same_values),
    **dict.fromkeys(_WITH_INDICES, _order_statistic),
    **dict.fromkeys(_MEANS, _mean),
    **dict.fromkeys(("max", "min"), _extreme_or_order_statistic),
    **dict.fromkeys(_STACK, _stacked),
    **dict.fromkeys(_UNIT, _unit_interval),
    **dict.fromkeys(_SYMMETRIC_UNIT, _symmetric_unit),
    **dict.fromkeys(_NORMS, _norm),
    **dict.fromkeys(_UNIT_VECTORS, _unit_vector),
    **dict.fromkeys(("triu", "tril", "diag", "diag_embed", "block_diag"), _zero_filled),
    "nansum": _nan_sum,
    **dict.fromkeys(("prod", "cumprod"), _product),
    **dict.fromkeys(("item", "tolist"), _to_python),
    **dict.fromkeys(_NUM_RESULT, _size_of),
    **dict.fromkeys(("floor", "ceil", "round", "trunc"), _rounded),
    "logsumexp": _logsumexp,
    **dict.fromkeys(("log_softmax", "logsigmoid"), _log_probability),
    **dict.fromkeys(_NONNEG_LOSSES, _loss),
    **dict.fromkeys(("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout"), _dropout),
}
