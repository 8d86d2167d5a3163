"""Small libcst builders shared by the kinds: calls and methods in the code's own spelling, the
operand of a site and how it is spelled, clamps and sign-preserving guards, and the double-where
rewrite of a where-branch site."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from grist_lsp.analyzer.catalogue import lookup, row
from grist_lsp.analyzer.where_branch import SAFE_FILL, guard_at

from .context import _Context, _dotted, _num, _paren, _Proposal

# Producers whose value is >= 0: a divisor built from them only needs clamp_min, not a
# sign-preserving guard. Matched on the function's last name so methods count too.
_NONNEG_PRODUCERS = {
    "abs",
    "exp",
    "exp2",
    "sqrt",
    "softmax",
    "sigmoid",
    "relu",
    "relu6",
    "softplus",
    "norm",
    "vector_norm",
    "matrix_norm",
    "square",
    "numel",
    "count_nonzero",
    "cosh",
    "len",
    "absolute",
}


# Reductions and casts that keep a non-negative operand non-negative.
_NONNEG_PRESERVING = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "float",
    "double",
    "half",
    "to",
    "detach",
    "clone",
    "contiguous",
    "squeeze",
    "unsqueeze",
    "view",
    "reshape",
    "flatten",
    "type_as",
    "expand_as",
    "prod",
    "cumsum",
}


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` ready to take ``.method(...)``: parenthesised unless it already binds tightly."""
    if node.lpar or isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return node
    return _paren(node)


def _method(node: cst.BaseExpression, name: str, *args: str | cst.BaseExpression, **kwargs: str) -> cst.Call:
    call_args = [cst.Arg(_expr(a) if isinstance(a, str) else a) for a in args]
    call_args += [
        cst.Arg(
            _expr(v),
            keyword=cst.Name(k),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
        for k, v in kwargs.items()
    ]
    return cst.Call(func=cst.Attribute(value=_atom(node), attr=cst.Name(name)), args=_commas(call_args))


def _call(func: str, *args: str | cst.BaseExpression) -> cst.Call:
    call_args = [cst.Arg(_expr(a) if isinstance(a, str) else a) for a in args]
    return cst.Call(func=_expr(func), args=_commas(call_args))


def _kwarg(keyword: str, value: str) -> cst.Arg:
    return cst.Arg(
        _expr(value),
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    return [
        a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if i < len(args) - 1
        else a
        for i, a in enumerate(args)
    ]


def _strip(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


@dataclass
class _Operand:
    """Where the dangerous operand sits in the site's node and how to put a new one there."""

    node: cst.BaseExpression
    form: str  # "function", "method", "inplace", "binary", "augassign", "math", "numpy"
    namespace: str = ""  # the module expression of a function call (``torch``, ``np``, ``math``)


def _operand(ctx: _Context, node: cst.CSTNode | None = None, op_name: str | None = None) -> _Operand | None:
    """The dangerous operand of the site (or of ``node``), following the catalogue's row."""
    node = node if node is not None else ctx.node
    op_name = op_name if op_name is not None else ctx.op
    if isinstance(node, cst.BinaryOperation):
        # ``a / b`` and the reflected ``2 / b``: the divisor is the right operand; for ``a ** p``
        # the base is the left one, for the reflected ``2 ** x`` the exponent is the right one.
        right = ctx.kind == "div" or op_name.endswith("__rpow__")
        return _Operand(node.right if right else node.left, "binary")
    if isinstance(node, cst.AugAssign):
        return _Operand(node.value if ctx.kind == "div" else node.target, "augassign")
    if not isinstance(node, cst.Call):
        return None
    # The call's own spelling decides method versus function (`torch.logit(x)` vs `x.logit()`);
    # the site's op name is only a fallback for the catalogue row.
    method = _is_method_call(ctx, node)
    spelled = _spelled_name(ctx, node)
    # Rows of one name agree on where the operand is, whatever their kind: the site's kind first.
    found = next((r for r in (row(spelled, ctx.kind), *lookup(spelled), *lookup(op_name)) if r), None)
    index = found.operand_index if found else 0
    keyword = found.operand_keyword if found else "input"
    if method:
        if not isinstance(node.func, cst.Attribute):
            return None
        name = node.func.attr.value
        form = "inplace" if name.endswith("_") and not name.endswith("__") else "method"
        if found is not None and not found.name.startswith("torch.Tensor."):
            index += 1  # a function row counts the tensor as argument 0 as well
        if index == 0:
            return _Operand(node.func.value, form)
        arg = _arg(node, index - 1, keyword)
        return None if arg is None else _Operand(arg.value, form)
    namespace = _dotted(node.func.value) if isinstance(node.func, cst.Attribute) else ""
    form = "math" if spelled.startswith("math.") else "numpy" if spelled.startswith("numpy.") else "function"
    arg = _arg(node, index, keyword)
    return None if arg is None else _Operand(arg.value, form, namespace)


def _is_method_call(ctx: _Context, node: cst.CSTNode) -> bool:
    callee = ctx.index.callee(node)
    return callee is not None and callee[0] == "method"


def _spelled_name(ctx: _Context, node: cst.Call) -> str:
    """``torch.log`` / ``torch.Tensor.log_`` / ``math.log``: the catalogue name of the call as written."""
    callee = ctx.index.callee(node)
    if callee is None:
        return ""
    kind, name = callee
    return f"torch.Tensor.{name}" if kind == "method" else name


def _arg(call: cst.Call, index: int, keyword: str | None) -> cst.Arg | None:
    if keyword:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index] if index < len(positional) else None


def _replace(
    ctx: _Context, old: cst.CSTNode, new: cst.CSTNode, within: cst.CSTNode | None = None
) -> cst.CSTNode:
    """``within`` (the site's node by default) with the child ``old`` swapped for ``new``."""
    within = within if within is not None else ctx.node
    return within.deep_replace(old, new)


def _guard_operand(
    ctx: _Context,
    operand: _Operand,
    lo: float | None,
    hi: float | None,
    lo_text: str | None = None,
    hi_text: str | None = None,
) -> cst.CSTNode | None:
    """The site's node with its operand clamped to [lo, hi], in the form the code used.

    Tensor methods chain the clamp before the op (``x.clamp_min(eps).log()``, in place for
    in-place ops so the tensor is still modified where the code expects it); functions wrap the
    argument; ``math.*`` gets ``max``/``min`` and ``numpy.*`` gets ``np.maximum``/``np.clip``.
    """
    lo_s = lo_text if lo_text is not None else (None if lo is None else _num(lo))
    hi_s = hi_text if hi_text is not None else (None if hi is None else _num(hi))
    x = operand.node
    if operand.form == "math":
        inner: cst.BaseExpression = _strip(x)
        if lo_s is not None:
            inner = _call("max", inner, lo_s)
        if hi_s is not None:
            inner = _call("min", inner, hi_s)
        guarded = inner
    elif operand.form == "numpy":
        ns = operand.namespace or "np"
        if lo_s is not None and hi_s is not None:
            guarded = _call(f"{ns}.clip", _strip(x), lo_s, hi_s)
        elif lo_s is not None:
            guarded = _call(f"{ns}.maximum", _strip(x), lo_s)
        elif hi_s is not None:
            guarded = _call(f"{ns}.minimum", _strip(x), hi_s)
        else:
            return None  # no bound: nothing to guard
    else:
        suffix = (
            "_" if operand.form == "inplace" or (operand.form == "augassign" and ctx.kind != "div") else ""
        )
        if lo_s is not None and hi_s is not None:
            guarded = _method(x, "clamp" + suffix, lo_s, hi_s)
        elif lo_s is not None:
            guarded = _method(x, "clamp_min" + suffix, lo_s)
        elif hi_s is not None:
            guarded = _method(x, "clamp_max" + suffix, hi_s)
        else:
            return None
    if operand.form == "augassign" and ctx.kind != "div":
        # ``x **= p`` becomes ``x.clamp_min_(eps).pow_(p)``: the same in-place update of x.
        assert isinstance(ctx.node, cst.AugAssign)
        name = {"PowerAssign": "pow_"}.get(type(ctx.node.operator).__name__)
        if name is None:
            return None
        return cst.Expr(_method(guarded, name, ctx.node.value))
    return _replace(ctx, x, guarded)


def _sign_preserving_guard(ctx: _Context, x: cst.BaseExpression) -> cst.BaseExpression:
    """A divisor kept at least eps away from zero without flipping its sign.

    ``b.clamp_min(eps)`` would turn every negative divisor into +eps and ``b + eps`` only
    moves zero when b >= 0, so for a divisor of unknown sign we push values in (-eps, eps)
    out to +-eps on their own side (zero goes to +eps). With a torch module alias and a simple
    operand the readable ``torch.where`` form is used; otherwise ``abs().clamp_min().copysign()``,
    which evaluates the operand once (the operand may be an expensive or side-effecting call).
    """
    eps = ctx.eps_text
    torch_ns = ctx.torch_namespace()
    bare = _strip(x)
    if torch_ns is not None and isinstance(bare, (cst.Name, cst.Attribute)):
        return _call(
            f"{torch_ns}.where",
            _expr(f"{ctx.module.code_for_node(bare)} < 0"),
            _method(bare, "clamp_max", f"-{eps}"),
            _method(bare, "clamp_min", eps),
        )
    return _method(_method(_method(x, "abs"), "clamp_min", eps), "copysign", bare)


def _nonnegative(ctx: _Context, node: cst.BaseExpression) -> bool:
    """A syntactic proof that ``node`` is >= 0 (abs, exp, norm, squares, sums of those ...)."""
    node = _strip(node)
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.BinaryOperation):
        op = type(node.operator).__name__
        if op == "Power" and isinstance(node.right, cst.Integer) and int(node.right.value) % 2 == 0:
            return True
        if op in ("Add", "Multiply", "Divide"):
            if op == "Multiply" and ctx.module.code_for_node(_strip(node.left)) == ctx.module.code_for_node(
                _strip(node.right)
            ):
                return True
            return _nonnegative(ctx, node.left) and _nonnegative(ctx, node.right)
        return False
    callee = ctx.index.callee(node)
    if callee is None or not isinstance(node, cst.Call):
        return False
    kind, name = callee
    last = name.rsplit(".", 1)[-1]
    if last in _NONNEG_PRODUCERS:
        return True
    if last in ("clamp", "clamp_min", "clip"):
        bound = _arg(node, 0 if kind == "method" else 1, "min")
        return bound is not None and _nonnegative_literal(bound.value)
    if last in _NONNEG_PRESERVING:
        if kind == "method" and isinstance(node.func, cst.Attribute):
            return _nonnegative(ctx, node.func.value)
        first = _arg(node, 0, "input")
        return first is not None and _nonnegative(ctx, first.value)
    return False


def _nonnegative_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) >= 0


def _is_integer_dtype(dtype: str | None) -> bool:
    return dtype is not None and any(t in dtype for t in ("int", "bool", "long", "short", "uint"))


def _op_label(ctx: _Context) -> str:
    if isinstance(ctx.node, cst.BinaryOperation):
        return {
            "Divide": "/",
            "FloorDivide": "//",
            "Modulo": "%",
            "Power": "**",
            "Multiply": "*",
            "Add": "+",
            "Subtract": "-",
            "MatrixMultiply": "@",
        }.get(type(ctx.node.operator).__name__, ctx.op)
    if isinstance(ctx.node, cst.AugAssign):
        return {
            "DivideAssign": "/=",
            "FloorDivideAssign": "//=",
            "ModuloAssign": "%=",
            "PowerAssign": "**=",
            "MultiplyAssign": "*=",
            "AddAssign": "+=",
            "SubtractAssign": "-=",
        }.get(type(ctx.node.operator).__name__, ctx.op)
    if isinstance(ctx.node, cst.Call):
        spelled = _spelled_name(ctx, ctx.node)
        if spelled:
            return spelled.replace("torch.Tensor.", "Tensor.", 1)
    return ctx.op.replace("torch.Tensor.", "Tensor.", 1)


def _clamp_fix(
    ctx: _Context,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_text: str | None = None,
    hi_text: str | None = None,
    words: str,
) -> list[_Proposal]:
    operand = _operand(ctx)
    if operand is None:
        return []
    new = _guard_operand(ctx, operand, lo, hi, lo_text, hi_text)
    if new is None:
        return []
    return [_Proposal(f"Clamp the operand of {_op_label(ctx)} {words}{ctx.dtype_note()}", ctx.node, new)]


def _double_where(ctx: _Context) -> list[_Proposal]:
    """``torch.where(c, torch.log(x), 0)`` -> ``torch.where(c, torch.log(torch.where(c, x, 1)), 0)``.

    The op's value is discarded where ``c`` is False, but its gradient still flows there
    (0 * inf = NaN at ``x == 0``). Giving the op a safe operand in that branch first (1 for log)
    leaves every kept value as it was and makes the discarded branch's derivative finite.
    """
    guard = guard_at(ctx.text, ctx.span)
    fill = SAFE_FILL.get(ctx.kind)
    if guard is None or guard.condition is None or fill is None or ctx.integer_operand:
        return []
    operand = _operand(ctx)
    if operand is None or operand.form not in ("function", "method", "binary"):
        return []
    namespace = ctx.torch_namespace()
    imports = [] if namespace is not None else ["import torch"]
    where = f"{namespace or 'torch'}.where"
    x = _strip(operand.node)
    branches = (x, fill) if guard.kept_when else (fill, x)
    safe = _call(where, _expr(guard.condition), *branches)
    title = (
        f"Give {_op_label(ctx)} a safe operand ({fill}) where {guard.words} discards its value "
        f"(double where: {where}({guard.condition}, ...) on the operand too)"
    )
    new = _replace(ctx, operand.node, safe)
    if not isinstance(new, cst.BaseExpression):
        return []
    return [_Proposal(title, ctx.node, new, imports)]
