"""Fixes for ops with a bounded domain: ``acos``/``asin``/``atanh``, ``acosh``, ``lgamma``,
``logit``: the operand clamped inside it, with an eps that survives ``1 - eps`` in its dtype."""

from __future__ import annotations

import libcst as cst

from .build import _arg, _clamp_fix, _commas, _expr, _is_method_call, _op_label
from .context import _Context, _num, _Proposal


def _acos_fixes(ctx: _Context) -> list[_Proposal]:
    e = _num(ctx.eps1)
    # asin/acos are finite at +-1 but their gradient is not: keep eps inside
    return _clamp_fix(ctx, lo_text=f"-1 + {e}", hi_text=f"1 - {e}", words=f"to [-1 + {e}, 1 - {e}]")


def _acosh_fixes(ctx: _Context) -> list[_Proposal]:
    return _clamp_fix(ctx, lo_text="1.0", words="to >= 1")


def _lgamma_fixes(ctx: _Context) -> list[_Proposal]:
    return _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)} (away from the poles)")


def _logit_fixes(ctx: _Context) -> list[_Proposal]:
    node = ctx.node
    if not isinstance(node, cst.Call):
        return []
    e = _num(ctx.eps1)
    existing = _arg(node, 0 if _is_method_call(ctx, node) else 1, "eps")
    new_arg = cst.Arg(
        _expr(e),
        keyword=cst.Name("eps"),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if existing is not None:
        if not (isinstance(existing.value, cst.Name) and existing.value.value == "None"):
            return []
        new = node.deep_replace(existing, existing.with_changes(value=_expr(e)))
    else:
        new = node.with_changes(args=_commas([*node.args, new_arg]))
    return [_Proposal(f"Pass eps={e} to {_op_label(ctx)}", node, new)]
