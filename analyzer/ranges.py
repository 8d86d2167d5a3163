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

This module evaluates expressions (operators, guards, calls); the lattice is ``facts.py``,
what a name, ``self.`` attribute or parameter stands for is ``bindings.py``, and transfer
functions of library calls are small functions in ``transfers.TRANSFERS`` (one per family,
keyed by short name), not added to ``_known_call``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from grist_lsp.analyzer.bindings import Bindings
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.facts import (
    BOTTOM,
    CYCLE,
    INF,
    TOP,
    Fact,
    corners,
    describe,
    fmt,
    join,
    nan_to,
    pow_interval,
    pow_range_safe,
    round_down,
    round_up,
    safe_call,
    shorten,
    square,
    static_safe,
    wrap,
)
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.sizes import SizeProofs
from grist_lsp.analyzer.tensors import NON_ARRAY_CALLS
from grist_lsp.analyzer.transfers import (
    ELEMENTWISE_VIEWS,
    NUM_RESULT,
    TRANSFERS,
    WITH_INDICES,
    CallSite,
    arange_bounds,
)

if TYPE_CHECKING:
    from grist_lsp.analyzer.provenance import Provenance

MAX_DEPTH = 60  # evaluation depth before giving up with TOP (never a RecursionError)
_A = TypeVar("_A")  # what a memoised range query is asked about (a Def, an expression)


_TORCH_ROOTS = ("torch.", "numpy.", "math.", "builtins.", "np.")
# Python types whose methods are not Tensor methods, whatever they are called.
NOT_TENSOR = frozenset({"num", "str", "module", "object", "none"})
# Re-exported: callers and tests read the lattice and its words through this module.
__all__ = [
    "INF",
    "NOT_TENSOR",
    "TOP",
    "Fact",
    "RangeAnalysis",
    "describe",
    "fmt",
    "join",
    "pow_interval",
    "pow_range_safe",
    "round_down",
    "round_up",
    "static_safe",
]


def _is_one(e: ast.AST) -> bool:
    return isinstance(e, ast.Constant) and not isinstance(e.value, bool) and e.value == 1


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
    bindings: Bindings = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.bindings = Bindings(self)

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
        return self._guarded(("def", d.key), self.bindings.binding_fact, d)

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
        return Fact(lo, hi, nonzero or lo > 0 or hi < 0, pytype, shorten(why))

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
            return shorten(ast.unparse(e), 40)
        except Exception:  # unparse is best effort on odd trees; words only
            return "expression"

    # --- evaluation ------------------------------------------------------------------

    def _eval(self, e: ast.AST) -> Fact:
        if isinstance(e, ast.Constant):
            v = e.value
            if isinstance(v, bool):
                return Fact(float(v), float(v), v, "num", repr(v))
            if isinstance(v, (int, float)):
                return self._num(float(safe_call(float, v, default=INF if v > 0 else -INF)))
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
            return self.bindings.name_fact(e)
        if isinstance(e, ast.Attribute):
            return self.bindings.attribute_fact(e)
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
            if isinstance(e.op, ast.Div):
                quotient = self._arange_fraction(e)
                if quotient is not None:
                    return quotient
            right = self.divisor(e) if isinstance(e.op, ast.Div) else self.fact(e.right)
            return self._binop(self.fact(e.left), e.op, right, e)
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

    def _subscript(self, e: ast.Subscript) -> Fact:
        v = e.value
        if isinstance(v, ast.Attribute) and v.attr == "shape":
            return self._size(e, "shape")
        if isinstance(v, ast.Call) and self._call_short(v) in WITH_INDICES and self._has_dim(v):
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
        why = f"{wrap(left_why)} {why_op} {wrap(right_why)}"
        if isinstance(op, ast.Add):
            return self._iv(nan_to(a.lo + b.lo, -INF), nan_to(a.hi + b.hi, INF), why, ptype)
        if isinstance(op, ast.Sub):
            if node is not None and isinstance(node, ast.BinOp) and self.same(node.left, node.right):
                return self._iv(0.0, 0.0, why, ptype)
            if isinstance(node, ast.BinOp) and self._bounds_above(node.right, node.left):
                # x - x.amax(-1, keepdim=True) <= 0 (+-inf in x are an upstream failure)
                return Fact(
                    -INF,
                    min(0.0, nan_to(a.hi - b.lo, INF)),
                    False,
                    ptype,
                    f"{wrap(left_why)} minus its maximum",
                )
            return self._iv(nan_to(a.lo - b.hi, -INF), nan_to(a.hi - b.lo, INF), why, ptype)
        if isinstance(op, ast.Mult):
            if node is not None and isinstance(node, ast.BinOp) and self.same(node.left, node.right):
                lo, hi = square(a)
                return self._iv(lo, hi, f"square of {a.why or '?'}", ptype)
            lo, hi = corners([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
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
                lo, hi = corners(
                    [safe_call(math.pow, x, e, default=INF) for x in (a.lo, a.hi) for e in (b.lo, b.hi)]
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

    def divisor(self, node: ast.BinOp) -> Fact:
        """The range of ``node.right`` where ``node`` divides by it: above the start of an
        ``arange(start, d)`` the dividend is made of when ``d`` is the divisor (every element e has
        start <= e < d, so where there is an element to divide, d > start; none, no division)."""
        b = self.fact(node.right)
        found = self._arange_in(node.left, node.right, True)
        if found is None:
            return b
        start = found[0]
        if start.lo < 0 or b.pytype == "bottom":
            return b
        return Fact(
            max(b.lo, start.lo), b.hi, True, b.pytype, f"{self._text(node.right)} > its arange's elements"
        )

    def _arange_fraction(self, node: ast.BinOp) -> Fact | None:
        """``arange(s, d) / d`` (through casts, views and slices) with s >= 0: in [0, 1); and
        ``arange(s, d) / (d - 1)``, whose largest element is the divisor: in [0, 1]."""
        found = self._arange_in(node.left, node.right, False)
        d = node.right
        if found is None and isinstance(d, ast.BinOp) and isinstance(d.op, ast.Sub) and _is_one(d.right):
            found = self._arange_in(node.left, d.left, False)
        if found is None or found[0].lo < 0:
            return None
        return Fact(
            0.0, 1.0, False, "tensor", f"arange(..., {self._text(node.right)}) / {self._text(node.right)}"
        )

    def _arange_in(self, e: ast.AST, end: ast.AST, scaled: bool, depth: int = 0) -> tuple[Fact] | None:
        """(the start's range,) of the ``arange(start, end)`` whose elements make up ``e``
        one for one (views, casts, slices, and with ``scaled`` elementwise arithmetic), or None."""
        if depth > 12:
            return None
        if isinstance(e, ast.Subscript):
            return self._arange_in(e.value, end, scaled, depth + 1)
        if scaled and isinstance(e, ast.UnaryOp):
            return self._arange_in(e.operand, end, scaled, depth + 1)
        if scaled and isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Add, ast.Sub, ast.Div)):
            return self._arange_in(e.left, end, scaled, depth + 1) or self._arange_in(
                e.right, end, scaled, depth + 1
            )
        if not isinstance(e, ast.Call):
            return None
        if self.resolver.qualified_name(e.func) == "torch.arange":
            start, stop, _step = arange_bounds(e)
            if stop is None or not self.same(stop, end):
                return None
            return (self.fact(start) if start is not None else self._num(0.0),)
        if (
            isinstance(e.func, ast.Attribute)
            and e.func.attr in ELEMENTWISE_VIEWS
            and self.method_receiver(e) is not None
        ):
            return self._arange_in(e.func.value, end, scaled, depth + 1)
        return None

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
            lo, hi = corners([x * y for x in (a.lo, a.hi) for y in inv])
            return self._iv(lo, hi, why, ptype)
        if a.lo >= 0 and b.lo >= 0:
            return self._iv(0.0, INF, why, ptype)
        if b.lo >= 0 and (b.nonzero or ptype == "num") and a.hi <= 0:
            return self._iv(-INF, 0.0, why, ptype)  # b > 0 (Python raises at b == 0): a's sign
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
                if root == "torch" and not qn.startswith(NON_ARRAY_CALLS):
                    return Fact(pytype="tensor")
                return Fact(pytype="unknown")  # dist.get_world_size(), np.random.seed(0)
            return TOP  # some other library's function
        if isinstance(e.func, ast.Attribute):
            recv = self.fact(e.func.value)
            if recv.pytype == "str":
                return Fact(pytype="str")
            if e.func.attr == "item" and not e.args and recv.pytype == "num":
                return recv  # np.finfo(np.float32).eps.item(): the number itself
            if self.method_receiver(e) is None:
                # Not a Tensor method: sizes and counts (x.shape.numel()) are numbers on
                # any object; anything else (self.var(h) with self.var an nn.Linear) is unknown.
                bound = self.flow.is_use(e.func) and self.flow.defs_reaching(e.func)
                if e.func.attr in NUM_RESULT and not bound:
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
            v = safe_call(float, call.args[0].value)
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
