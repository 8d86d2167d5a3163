"""Fixes for ``overflow`` sites (a float16 product or reduction whose result may pass 65504): its
tensor operands are upcast first (``x.float().pow(2).sum()``, ``a.float() @ b.float()``), so the
op runs and returns float32, as autocast does for reductions. The result stays float32: casting it
back to float16 would turn the same large value into inf again."""

from __future__ import annotations

import libcst as cst

from .build import _is_method_call, _method, _op_label, _strip
from .context import _Context, _Proposal

# Elementwise ops an upcast goes through to reach their operand: what they compute is exact in
# float32 once their operand is, and in float16 they overflow before the reduction around them.
_ELEMENTWISE = frozenset({"pow", "square", "mul", "multiply", "abs", "neg"})


def _overflow_fixes(ctx: _Context) -> list[_Proposal]:
    node = ctx.node
    if _in_autocast(ctx):
        return []  # autocast casts a product's float32 operands back to float16: no upcast helps
    if isinstance(node, cst.BinaryOperation):
        new: cst.CSTNode = node.with_changes(left=_upcast(node.left), right=_upcast(node.right))
    elif isinstance(node, cst.Call):
        new = _upcast_call(ctx, node)
    else:
        return []  # x *= y: the target keeps its float16 storage, an upcast value cannot go back in
    if new.deep_equals(node):
        return []
    return [
        _Proposal(f"Upcast the operands of {_op_label(ctx)} to float32 (float16 ends at 65504)", node, new)
    ]


def _upcast_call(ctx: _Context, call: cst.Call) -> cst.Call:
    args = [
        a.with_changes(value=_upcast(a.value)) if a.keyword is None and not a.star else a for a in call.args
    ]
    if _is_method_call(ctx, call) and isinstance(call.func, cst.Attribute):
        return call.with_changes(func=call.func.with_changes(value=_upcast(call.func.value)), args=args)
    return call.with_changes(args=args)


def _in_autocast(ctx: _Context) -> bool:
    node: cst.CSTNode | None = ctx.node
    while node is not None:
        if isinstance(node, cst.With) and any("autocast" in ctx.module.code_for_node(i) for i in node.items):
            return True
        node = ctx.index.parents.get(node)
    return False


def _upcast(e: cst.BaseExpression) -> cst.BaseExpression:
    """``e.float()``, unless ``e`` is a literal or a string (an einsum's equation): no tensor. An
    elementwise product or power is upcast at its own operands (``x.float().pow(2)``, not
    ``x.pow(2).float()``, which has already overflowed)."""
    bare = _strip(e)
    if (
        isinstance(bare, cst.Call)
        and isinstance(bare.func, cst.Attribute)
        and bare.func.attr.value in _ELEMENTWISE
    ):
        return e.with_changes(func=bare.func.with_changes(value=_upcast(bare.func.value)))
    if isinstance(bare, cst.BinaryOperation) and isinstance(bare.operator, (cst.Power, cst.Multiply)):
        return e.with_changes(left=_upcast(bare.left), right=_upcast(bare.right))
    if isinstance(
        bare, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
    ):
        return e
    if isinstance(bare, cst.UnaryOperation) and isinstance(bare.expression, (cst.Integer, cst.Float)):
        return e
    if (
        isinstance(bare, cst.Call)
        and isinstance(bare.func, cst.Attribute)
        and bare.func.attr.value == "float"
    ):
        return e
    return _method(e, "float")
