"""Fixes for divisions: a clamp from below for a divisor proved >= 0, else a guard that keeps the
divisor's sign."""

from __future__ import annotations

import libcst as cst

from .build import _method, _nonnegative, _op_label, _operand, _replace, _sign_preserving_guard
from .context import _Context, _Proposal
from .exp import _manual_softmax


def _div_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = []
    if isinstance(ctx.node, cst.BinaryOperation):
        softmax = _manual_softmax(ctx, ctx.node)
        if softmax is not None:
            proposals.append(softmax)
    return proposals + _div_guard(ctx)


def _div_guard(ctx: _Context) -> list[_Proposal]:
    operand = _operand(ctx)
    if operand is None or operand.form in ("math", "numpy"):
        return []
    x = operand.node
    eps = ctx.eps_text
    label = "divisor" if ctx.op.split(".")[-1] not in ("reciprocal", "reciprocal_") else "operand"
    if _nonnegative(ctx, x) or ctx.operand_nonnegative:
        suffix = "_" if operand.form == "inplace" and ctx.op.endswith("reciprocal_") else ""
        guarded = _method(x, "clamp_min" + suffix, eps)
        title = f"Clamp the {label} of {_op_label(ctx)} to >= {eps}{ctx.dtype_note()}"
    else:
        guarded = _sign_preserving_guard(ctx, x)
        if operand.form == "inplace" and ctx.op.endswith("reciprocal_"):
            return []  # an in-place reciprocal of a signed tensor has no in-place guard spelling
        title = (
            f"Keep the {label} of {_op_label(ctx)} at least {eps} away from 0 (sign kept){ctx.dtype_note()}"
        )
    return [_Proposal(title, ctx.node, _replace(ctx, x, guarded))]
