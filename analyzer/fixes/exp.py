"""Fixes for ``exp`` sites: a softmax spelled by hand becomes ``softmax``, else the exponent is
clamped below the dtype's overflow."""

from __future__ import annotations

import math

import libcst as cst

from .build import _arg, _atom, _call, _clamp_fix, _commas, _expr, _operand, _strip
from .context import _Context, _dotted, _num, _Proposal
from .log import _logsumexp_of


def _exp_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = _exp_patterns(ctx)
    base = ctx.op.rsplit(".", 1)[-1]
    base = base if base.startswith("__") else base.rstrip("_")
    ln_max = ctx.limits.ln_max
    if base == "exp2":
        bound = math.floor(ln_max / math.log(2) * 10) / 10
    elif base == "__rpow__":
        if not isinstance(ctx.node, cst.BinaryOperation):
            return proposals
        left = _strip(ctx.node.left)
        if not isinstance(left, (cst.Integer, cst.Float)) or float(left.value) <= 1:
            return proposals
        bound = math.floor(ln_max / math.log(float(left.value)) * 10) / 10
    else:
        bound = math.floor(ln_max * 10) / 10
    b = _num(bound)
    if base in ("cosh", "sinh"):
        # both overflow on the negative side too
        return proposals + _clamp_fix(ctx, lo_text=f"-{b}", hi_text=b, words=f"to [-{b}, {b}]")
    return proposals + _clamp_fix(ctx, hi=bound, words=f"to <= {b} (above it the result overflows to inf)")


def _exp_patterns(ctx: _Context) -> list[_Proposal]:
    """exp inside log(sum(exp(x))) -> logsumexp; exp(x) / exp(x).sum(d) -> softmax;
    log(1 + exp(x)) -> softplus. The edit then replaces the enclosing expression."""
    if ctx.op not in ("torch.exp", "torch.Tensor.exp") or not isinstance(ctx.node, cst.Call):
        return []
    operand = _operand(ctx)
    if operand is None:
        return []
    x = operand.node
    parent = ctx.index.parent(ctx.node)
    # exp(x) / exp(x).sum(dim, keepdim=True) -> softmax(x, dim), from either exp
    if isinstance(parent, cst.BinaryOperation):
        softmax = _manual_softmax(ctx, parent)
        if softmax is not None:
            return [softmax]
    if isinstance(parent, cst.Attribute):
        total = ctx.index.parent(parent)
        div = ctx.index.parent(total) if total is not None else None
        if isinstance(div, cst.BinaryOperation) and _strip(div.right) is total:
            softmax = _manual_softmax(ctx, div)
            if softmax is not None:
                return [softmax]
    # log(sum(exp(x))) -> logsumexp
    total = parent
    if isinstance(total, cst.Attribute):  # x.exp().sum(...): the Attribute's parent is the call
        total = ctx.index.parent(total)
    outer = ctx.index.parent(total) if total is not None else None
    if isinstance(outer, cst.Attribute):
        outer = ctx.index.parent(outer)
    if isinstance(total, cst.Call) and isinstance(outer, cst.Call):
        lse = _logsumexp_of(ctx, total)
        outer_callee = ctx.index.callee(outer)
        if lse is not None and outer_callee in (("function", "torch.log"), ("method", "log")):
            return [_Proposal("Use logsumexp", outer, lse)]
    # log(1 + exp(x)) -> softplus(x)
    one = _strip(parent.left) if isinstance(parent, cst.BinaryOperation) else None
    if (
        isinstance(parent, cst.BinaryOperation)
        and isinstance(parent.operator, cst.Add)
        and isinstance(one, cst.Integer)
        and one.value == "1"
    ):
        outer = ctx.index.parent(parent)
        outer_callee = ctx.index.callee(outer) if outer is not None else None
        if outer_callee == ("function", "torch.log") and isinstance(outer, cst.Call) and len(outer.args) == 1:
            ns, imports = ctx.functional()
            return [_Proposal(f"Use {ns}.softplus", outer, _call(f"{ns}.softplus", _strip(x)), imports)]
    return []


def _manual_softmax(ctx: _Context, div: cst.BinaryOperation) -> _Proposal | None:
    """``exp(x) / exp(x).sum(dim, keepdim=True)`` (any spelling of exp) -> ``softmax(x, dim)``."""
    if not isinstance(div.operator, cst.Divide):
        return None
    numerator, total = _strip(div.left), _strip(div.right)
    num_callee, total_callee = ctx.index.callee(numerator), ctx.index.callee(total)
    if (
        not isinstance(numerator, cst.Call)
        or not isinstance(total, cst.Call)
        or total_callee != ("method", "sum")
    ):
        return None
    assert isinstance(total.func, cst.Attribute)
    code = ctx.module.code_for_node
    if code(_strip(total.func.value)) != code(numerator):
        return None
    dim = _arg(total, 0, "dim")
    if dim is None:
        return None
    # keep `dim=` when the code wrote it
    dim_arg = cst.Arg(
        _strip(dim.value), keyword=dim.keyword, equal=dim.equal if dim.keyword else cst.MaybeSentinel.DEFAULT
    )
    if num_callee == ("method", "exp") and isinstance(numerator.func, cst.Attribute) and not numerator.args:
        new: cst.BaseExpression = cst.Call(
            func=cst.Attribute(value=_atom(numerator.func.value), attr=cst.Name("softmax")), args=[dim_arg]
        )
    elif (
        num_callee == ("function", "torch.exp")
        and len(numerator.args) == 1
        and isinstance(numerator.func, cst.Attribute)
    ):
        ns = _dotted(numerator.func.value)
        new = cst.Call(
            func=_expr(f"{ns}.softmax"), args=_commas([cst.Arg(_strip(numerator.args[0].value)), dim_arg])
        )
    else:
        return None
    return _Proposal("Use softmax", div, new)
