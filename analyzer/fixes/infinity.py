"""Fixes for ``inf_arith`` sites (a product, sum or contraction fed the program's own infinity):
the operand that holds it goes through ``torch.nan_to_num(x, nan=torch.nan)`` first. That turns
+-inf into the dtype's largest finite values and leaves NaN alone, so ``0 * -inf`` becomes 0 and
``-inf - -inf`` 0, while a NaN made elsewhere still shows."""

from __future__ import annotations

import libcst as cst

from .build import _arg, _commas, _expr, _is_method_call, _kwarg, _op_label, _operand, _strip
from .context import _Context, _Proposal


def _inf_arith_fixes(ctx: _Context) -> list[_Proposal]:
    sides = _flagged_sides(ctx)
    if not sides:
        return []
    namespace = ctx.torch_namespace()
    imports = [] if namespace is not None else ["import torch"]
    torch_name = namespace or "torch"
    new = ctx.node
    for side in sides:
        args = _commas([cst.Arg(_strip(side)), _kwarg("nan", f"{torch_name}.nan")])
        new = new.deep_replace(side, cst.Call(_expr(f"{torch_name}.nan_to_num"), args))
    words = " and ".join(ctx.module.code_for_node(_strip(s)) for s in sides)
    title = f"Keep the infinities of {words} out of {_op_label(ctx)}: torch.nan_to_num"
    return [_Proposal(title, ctx.node, new, imports)]


def _flagged_sides(ctx: _Context) -> list[cst.BaseExpression]:
    """The operands the static pass said may hold an infinity (``Site.operand``: left, right, both)."""
    node, label = ctx.node, ctx.operand_label
    if isinstance(node, cst.BinaryOperation):
        pair = [node.left, node.right]
    elif isinstance(node, cst.AugAssign):
        # The target cannot be wrapped in place; only a right-hand infinity has a fix here.
        return [node.value] if label == "right" else []
    elif isinstance(node, cst.Call):
        first = _operand(ctx)
        if first is None:
            return []
        method = _is_method_call(ctx, node)
        following = _arg(node, 0, None) if method else _following_arg(node, first.node)
        pair = [first.node, following.value if following is not None else None]
    else:
        return []
    chosen = {"left": pair[:1], "right": pair[1:], "both": pair}.get(label, [])
    return [side for side in chosen if side is not None]


def _following_arg(call: cst.Call, first: cst.BaseExpression) -> cst.Arg | None:
    """The positional argument right after ``first`` (``torch.mul(a, b)``: ``b``)."""
    args = [a for a in call.args if a.keyword is None and a.star == ""]
    for i, a in enumerate(args[:-1]):
        if a.value is first:
            return args[i + 1]
    return None
