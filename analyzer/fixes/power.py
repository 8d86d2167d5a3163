"""Fixes for ``pow`` and roots (``sqrt``, ``rsqrt``): the base clamped into the exponent's safe
region."""

from __future__ import annotations

import libcst as cst

from grist_lsp.analyzer.catalogue import row

from .build import (
    _arg,
    _clamp_fix,
    _is_method_call,
    _op_label,
    _operand,
    _replace,
    _sign_preserving_guard,
    _spelled_name,
    _strip,
)
from .context import _Context, _num, _Proposal


def _root_fixes(ctx: _Context) -> list[_Proposal]:
    # eps rather than 0: sqrt's gradient is infinite at 0 and rsqrt(0) is inf.
    return _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)}")


def _pow_fixes(ctx: _Context) -> list[_Proposal]:
    operand = _operand(ctx)
    if operand is None:
        return []
    exponent = _exponent(ctx)
    if (
        exponent is not None
        and exponent < 0
        and float(exponent).is_integer()
        and operand.form in ("function", "method", "binary")
    ):
        # a negative integer power is only undefined at 0; clamping would flip odd powers of
        # negative bases, so keep the sign like a divisor guard
        guarded = _sign_preserving_guard(ctx, operand.node)
        eps = _num(ctx.eps)
        return [
            _Proposal(
                f"Keep the base of {_op_label(ctx)} at least {eps} away from 0 (sign kept)",
                ctx.node,
                _replace(ctx, operand.node, guarded),
            )
        ]
    return _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)}")


def _exponent(ctx: _Context) -> float | None:
    node = ctx.node
    value: cst.BaseExpression | None = None
    if isinstance(node, (cst.BinaryOperation, cst.AugAssign)):
        value = node.right if isinstance(node, cst.BinaryOperation) else node.value
    elif isinstance(node, cst.Call):
        found = row(_spelled_name(ctx, node), ctx.kind) or row(ctx.op, ctx.kind)
        method = _is_method_call(ctx, node)
        idx = (found.aux_index if found and found.aux_index is not None else 1) - (1 if method else 0)
        arg = _arg(node, idx, "exponent")
        value = arg.value if arg else None
    if value is None:
        return None
    value = _strip(value)
    sign = 1.0
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        sign, value = -1.0, _strip(value.expression)
    if isinstance(value, (cst.Integer, cst.Float)):
        return sign * float(value.value)
    return None
