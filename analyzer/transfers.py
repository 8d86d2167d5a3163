"""Transfer functions of library calls: what a torch/numpy/math function or a Tensor method
does to the range of the tensor it operates on, one small function per family of ops, keyed by
short name in ``TRANSFERS`` (``RangeAnalysis._known_call`` looks them up).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from grist_lsp.analyzer.facts import INF, TOP, UNIT_SLOP, Fact, join, safe_call, square

if TYPE_CHECKING:
    from grist_lsp.analyzer.ranges import RangeAnalysis

# --- short names of the calls we know, by what they do to a range --------------------

_IDENTITY = frozenset(
    """detach clone contiguous float double half bfloat16 to cpu cuda view reshape flatten
squeeze unsqueeze permute transpose t expand expand_as repeat view_as reshape_as type_as
flip roll narrow select index_select gather masked_select movedim unflatten repeat_interleave
squeeze_ unsqueeze_ detach_ max min amax amin median nanmedian mean nanmean quantile nanquantile
sort msort topk kthvalue cummax cummin mode take take_along_dim diagonal tile broadcast_to
expand_copy chunk split unbind tensor_split hsplit vsplit""".split()
)
# Methods that keep a tensor's elements one for one (an empty tensor stays empty).
ELEMENTWISE_VIEWS = frozenset(
    """float double half bfloat16 to type type_as view reshape flatten unsqueeze squeeze contiguous
clone detach t transpose permute expand repeat""".split()
)
_STACK = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"})
_MEANS = frozenset({"mean", "nanmean", "quantile", "nanquantile"})
WITH_INDICES = frozenset(
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
NUM_RESULT = frozenset({"numel", "dim", "ndimension", "nelement", "size", "element_size", "__len__"})


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
        safe_call(base, inp.lo, default=0.0 if inp.lo < 0 else INF)
        if inp.lo != -INF
        else (-1.0 if c.name == "expm1" else 0.0)
    )
    hi = safe_call(base, inp.hi, default=INF) if inp.hi != INF else INF
    return c.ranges._iv(lo, hi, f"{c.name} of {inp.why or 'a value'}", c.T)


def _logarithm(c: CallSite) -> Fact:
    """log, log2, log10, log1p (torch and math): monotone where defined."""
    inp, fn = c.inp, _LOG[c.name]
    shift = 1.0 if c.name == "log1p" else 0.0
    lo = safe_call(fn, inp.lo, default=-INF) if inp.lo + shift > 0 else -INF
    hi = safe_call(fn, inp.hi, default=INF) if inp.hi + shift > 0 else -INF
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
        lo, hi = square(c.inp)
        return c.ranges._iv(lo, hi, f"square of {c.inp.why or 'a value'}", c.T)
    return c.ranges._abs(c.inp, c.T)


def _counts(c: CallSite) -> Fact | None:
    """bincount, histc, count_nonzero: how many, never negative; a weighted bincount sums its
    weights, which may be negative."""
    if c.name == "bincount" and (c.arg(1, "weights") is not None):
        return None
    return c.ranges._iv(0.0, INF, f"{c.name} counts", c.T)


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
        start, end, step = arange_bounds(call)
        if end is None:
            return Fact(pytype="tensor")
        lo_f = r.fact(start) if start is not None else r._num(0.0)
        hi_f = r.fact(end)
        step_f = r.fact(step) if step is not None else r._num(1.0)
        if step_f.lo > 0:
            # start <= every element < end (torch raises when end < start with a positive step)
            return Fact(lo_f.lo, max(hi_f.hi, lo_f.hi), False, "tensor", "arange")
        return Fact(min(lo_f.lo, hi_f.lo), max(lo_f.hi, hi_f.hi), False, "tensor", "arange")
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
    **dict.fromkeys(_IDENTITY - WITH_INDICES - _MEANS, _same_values),
    **dict.fromkeys(WITH_INDICES, _order_statistic),
    **dict.fromkeys(_MEANS, _mean),
    **dict.fromkeys(("max", "min"), _extreme_or_order_statistic),
    **dict.fromkeys(_STACK, _stacked),
    **dict.fromkeys(_UNIT, _unit_interval),
    **dict.fromkeys(_SYMMETRIC_UNIT, _symmetric_unit),
    **dict.fromkeys(_NORMS, _norm),
    **dict.fromkeys(_UNIT_VECTORS, _unit_vector),
    **dict.fromkeys(("triu", "tril", "diag", "diag_embed", "block_diag"), _zero_filled),
    "nansum": _nan_sum,
    **dict.fromkeys(("bincount", "histc", "count_nonzero"), _counts),
    **dict.fromkeys(("prod", "cumprod"), _product),
    **dict.fromkeys(("item", "tolist"), _to_python),
    **dict.fromkeys(NUM_RESULT, _size_of),
    **dict.fromkeys(("floor", "ceil", "round", "trunc"), _rounded),
    "logsumexp": _logsumexp,
    **dict.fromkeys(("log_softmax", "logsigmoid"), _log_probability),
    **dict.fromkeys(_NONNEG_LOSSES, _loss),
    **dict.fromkeys(("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout"), _dropout),
}


# Calls whose arguments are Python numbers, the evidence for an unannotated parameter passed to
# them: torch.nn classes (sizes, rates, eps) but not the containers and losses, which take
# modules and weight tensors; the sizes of tensor factories; range; a tensor's new shape.
_NOT_NUMBER_CLASSES = frozenset(
    {"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Parameter", "Buffer"}
)
_SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "randn", "rand", "eye"})
_SHAPE_METHODS = frozenset({"view", "reshape", "expand", "repeat", "unflatten", "new_zeros", "new_ones"})


def number_arguments(call: ast.Call, qualified: str | None) -> tuple[str, bool] | None:
    """(the callee's words, whether its arguments are sizes) when the positional Name arguments
    of ``call`` are Python numbers, else None."""
    if qualified is None:
        if isinstance(call.func, ast.Attribute) and call.func.attr in _SHAPE_METHODS:
            return f".{call.func.attr}()", False
        return None
    short = qualified.rsplit(".", 1)[-1]
    if qualified == "builtins.range":
        return "range()", False
    if qualified.startswith("torch.nn.") and short[:1].isupper():
        if short in _NOT_NUMBER_CLASSES or short.endswith("Loss"):
            return None
        return f"nn.{short}()", True
    if qualified.startswith("torch.") and short in _SIZED_FACTORIES:
        return f"torch.{short}()", True
    return None


def arange_bounds(call: ast.Call) -> tuple[ast.expr | None, ast.expr | None, ast.expr | None]:
    """(start, end, step) of a ``torch.arange`` call, positional or by keyword (None: absent)."""
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    pos = [a for a in call.args if not isinstance(a, ast.Starred)]
    if len(pos) != len(call.args):
        return None, None, None
    if len(pos) == 1 and "end" not in kw:
        return kw.get("start"), pos[0], kw.get("step")
    names = ("start", "end", "step")
    got = dict(zip(names, pos, strict=False))
    for n in names:
        if n in kw:
            got[n] = kw[n]
    return got.get("start"), got.get("end"), got.get("step")
