"""Fixes for reductions: ``softmax`` of rows that may be fully masked, ``var``/``std`` of a single
element (``correction=0``), ``mean`` of a possibly empty selection."""

from __future__ import annotations

import libcst as cst

from .build import _atom, _call, _clamp_fix, _commas, _expr, _is_method_call, _kwarg, _method, _strip
from .context import _Context, _dotted, _num, _Proposal


def _softmax_fixes(ctx: _Context) -> list[_Proposal]:
    # -inf -> the dtype's lowest finite value: a fully masked row becomes uniform instead of NaN,
    # and every other row is unchanged (exp underflows to exactly 0 either way).
    lowest = _num(-ctx.limits.max)
    return _clamp_fix(
        ctx, lo_text=lowest, words=f"to >= {lowest} (mask with the lowest finite value, not -inf)"
    )


def _var_fixes(ctx: _Context) -> list[_Proposal]:
    node = ctx.node
    if not isinstance(node, cst.Call):
        return []
    for a in node.args:
        if a.keyword is not None and a.keyword.value == "unbiased":
            new = node.deep_replace(a.value, cst.Name("False"))
            return [_Proposal("Use unbiased=False (population variance: defined for one element)", node, new)]
        if a.keyword is not None and a.keyword.value == "correction":
            new = node.deep_replace(a.value, cst.Integer("0"))
            return [_Proposal("Use correction=0 (population variance: defined for one element)", node, new)]
    # `var(x, 0, True)` / `x.var(0, True)`: a positional bool is `unbiased`
    for a in node.args:
        if a.keyword is None and isinstance(a.value, cst.Name) and a.value.value == "True":
            new = node.deep_replace(a.value, cst.Name("False"))
            return [_Proposal("Use unbiased=False (population variance: defined for one element)", node, new)]
    older_style = "unbiased=" in ctx.text
    keyword, value = ("unbiased", "False") if older_style else ("correction", "0")
    new = node.with_changes(args=_commas([*node.args, _kwarg(keyword, value)]))
    proposals = [
        _Proposal(f"Use {keyword}={value} (population variance: defined for one element)", node, new)
    ]
    # The same estimator wherever it was defined, 0 for a single element. It goes first: the
    # output does not change for inputs that did not hit the bug, while correction=0 silently
    # scales every result by (n-1)/n, which a program whose output cannot be compared (a
    # script) would not reveal.
    count = _reduced_count(ctx, node)
    if count is not None:
        guard = f"bool({count} > 1)" if older_style else f"int({count} > 1)"
        kept = node.with_changes(args=_commas([*node.args, _kwarg(keyword, guard)]))
        proposals.insert(
            0,
            _Proposal(f"Keep the unbiased estimate; {keyword}={value} only for a single element", node, kept),
        )
    return proposals


def _reduced_count(ctx: _Context, node: cst.Call) -> str | None:
    """Code for the number of elements a var/std call reduces over (no dim, or one simple dim)."""
    method = _is_method_call(ctx, node)
    if method:
        assert isinstance(node.func, cst.Attribute)
        x, rest = node.func.value, list(node.args)
    else:
        if not node.args:
            return None
        x, rest = node.args[0].value, list(node.args[1:])
    if not isinstance(_strip(x), (cst.Name, cst.Attribute)):
        return None  # the operand would be evaluated twice
    code = ctx.module.code_for_node(_strip(x))
    dims = [
        a
        for a in rest
        if (a.keyword is None and not isinstance(a.value, cst.Name))
        or (a.keyword is not None and a.keyword.value == "dim")
    ]
    if not dims:
        return f"{code}.numel()"
    dim = _strip(dims[0].value)
    if len(dims) == 1 and isinstance(dim, (cst.Integer, cst.UnaryOperation, cst.Name)):
        return f"{code}.size({ctx.module.code_for_node(dim)})"
    return None


def _mean_fixes(ctx: _Context) -> list[_Proposal]:
    """``x.mean()`` -> ``x.sum() / max(x.numel(), 1)``: 0 for an empty selection, same value otherwise."""
    node = ctx.node
    if not isinstance(node, cst.Call) or ctx.op.endswith("nanmean"):
        return []
    if _is_method_call(ctx, node):
        if not isinstance(node.func, cst.Attribute):
            return []
        x, rest = node.func.value, list(node.args)
        total_func = lambda args: cst.Call(  # noqa: E731
            func=cst.Attribute(value=_atom(x), attr=cst.Name("sum")), args=args
        )
    else:
        if not node.args or not isinstance(node.func, cst.Attribute):
            return []
        x, rest = node.args[0].value, list(node.args[1:])
        ns = _dotted(node.func.value)
        total_func = lambda args: cst.Call(func=_expr(f"{ns}.sum"), args=_commas([cst.Arg(_strip(x)), *args]))  # noqa: E731
    if any(a.keyword is not None and a.keyword.value not in ("dim", "keepdim") for a in rest):
        return []
    dims = [a for a in rest if a.keyword is None or a.keyword.value == "dim"]
    if not dims:
        count = _method(x, "numel")
    elif len(dims) == 1 and isinstance(_strip(dims[0].value), (cst.Integer, cst.Name, cst.UnaryOperation)):
        count = _method(x, "size", _strip(dims[0].value))
    else:
        return []
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest]
    new = cst.BinaryOperation(
        left=total_func(_commas(args)),
        operator=cst.Divide(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=_call("max", count, "1"),
    )
    return [_Proposal("Divide the sum by max(count, 1) (0 for an empty selection)", node, new)]
