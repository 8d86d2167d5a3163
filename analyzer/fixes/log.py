"""Fixes for ``log`` / ``log1p`` sites: ``log_softmax``, ``logsigmoid``, ``logsumexp``, ``xlogy``
where the code spells those by hand, else a clamp of the operand."""

from __future__ import annotations

import libcst as cst

from .build import _arg, _atom, _call, _clamp_fix, _commas, _expr, _method, _operand, _strip
from .context import (
    _EXP_NAMES,
    _SIGMOID_NAMES,
    _SOFTMAX_NAMES,
    _SUM_NAMES,
    _Context,
    _dotted,
    _num,
    _Proposal,
)


def _log_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = _log_patterns(ctx)
    proposals += _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)}")
    return proposals


def _log_patterns(ctx: _Context) -> list[_Proposal]:
    """log(softmax) -> log_softmax, log(sigmoid) -> logsigmoid, log(sum(exp)) -> logsumexp."""
    if ctx.op not in ("torch.log", "torch.Tensor.log") or not isinstance(ctx.node, cst.Call):
        return []
    operand = _operand(ctx)
    if operand is None:
        return []
    if operand.form == "function" and len(ctx.node.args) != 1:
        return []  # `out=` and friends: a pattern rewrite would drop them
    if operand.form == "method" and ctx.node.args:
        return []
    inner = _strip(operand.node)
    if isinstance(inner, cst.Name):
        # `probs = softmax(z)` ... `log(probs)`: the same rewrite, through the variable
        inner = _single_assignment(ctx, inner) or inner
    negate = False
    left = _strip(inner.left) if isinstance(inner, cst.BinaryOperation) else None
    if (
        isinstance(inner, cst.BinaryOperation)
        and isinstance(inner.operator, cst.Subtract)
        and isinstance(left, (cst.Integer, cst.Float))
        and float(left.value) == 1.0
    ):
        # log(1 - sigmoid(x)) == logsigmoid(-x)
        inner, negate = _strip(inner.right), True
    callee = ctx.index.callee(inner)
    if callee is None or not isinstance(inner, cst.Call):
        return []
    kind, name = callee
    if negate and not (
        (kind == "function" and name in _SIGMOID_NAMES) or (kind == "method" and name == "sigmoid")
    ):
        return []
    if (kind == "function" and name in _SOFTMAX_NAMES) or (kind == "method" and name == "softmax"):
        assert isinstance(inner.func, (cst.Attribute, cst.Name))
        if isinstance(inner.func, cst.Attribute):
            func = inner.func.with_changes(attr=cst.Name("log_softmax"))
        else:  # a bare `softmax` imported by name: spell log_softmax from its module
            module = name.rsplit(".", 1)[0]
            alias = ctx.module_alias(module)
            func = _expr(f"{alias}.log_softmax") if alias else cst.Name("log_softmax")
            if alias is None:
                return [
                    _Proposal(
                        "Use log_softmax",
                        ctx.node,
                        inner.with_changes(func=func),
                        [f"from {module} import log_softmax"],
                    )
                ]
        return [_Proposal("Use log_softmax", ctx.node, inner.with_changes(func=func, lpar=[], rpar=[]))]
    if (kind == "function" and name in _SIGMOID_NAMES) or (kind == "method" and name == "sigmoid"):
        if kind == "method":
            assert isinstance(inner.func, cst.Attribute)
            if inner.args:
                return []
            x = _strip(inner.func.value)
        else:
            arg = _arg(inner, 0, "input")
            if arg is None or len(inner.args) != 1:
                return []
            x = arg.value
        ns, imports = ctx.functional()
        if negate:
            x = cst.UnaryOperation(operator=cst.Minus(), expression=_atom(_strip(x)))
        return [
            _Proposal(
                "Use F.logsigmoid" if ns == "F" else f"Use {ns}.logsigmoid",
                ctx.node,
                _call(f"{ns}.logsigmoid", x),
                imports,
            )
        ]
    lse = _logsumexp_of(ctx, inner)
    if lse is not None:
        return [_Proposal("Use logsumexp", ctx.node, lse)]
    return []


class _Bindings(cst.CSTVisitor):
    """Every place a function binds each name (parameters, assignments, loop targets ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.count: dict[str, int] = {}
        self.values: dict[str, cst.BaseExpression] = {}

    def _bind(self, target: cst.CSTNode, value: cst.BaseExpression | None = None) -> None:
        if isinstance(target, cst.Name):
            self.count[target.value] = self.count.get(target.value, 0) + 1
            if value is not None:
                self.values[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value if len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target)


def _single_assignment(ctx: _Context, name: cst.Name) -> cst.BaseExpression | None:
    """The value of ``name`` when the enclosing function assigns it exactly once, from a call
    whose name arguments are themselves never rebound (so the call can move to the use)."""
    function = ctx.node
    while function is not None and not isinstance(function, cst.FunctionDef):
        function = ctx.index.parents.get(function)
    if function is None:
        return None
    bindings = _Bindings()
    function.visit(bindings)
    value = bindings.values.get(name.value)
    if bindings.count.get(name.value) != 1 or not isinstance(value, cst.Call):
        return None
    used = {n.value for n in _names_in(value)}
    if any(bindings.count.get(n, 0) > 1 for n in used):
        return None
    return value


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    node.visit(Collect())
    return found


def _logsumexp_of(ctx: _Context, total: cst.BaseExpression) -> cst.BaseExpression | None:
    """``logsumexp(x, dim)`` for ``sum(exp(x), dim)`` in any of its spellings, else None."""
    total = _strip(total)
    callee = ctx.index.callee(total)
    if callee is None or not isinstance(total, cst.Call):
        return None
    kind, name = callee
    if kind == "method" and name == "sum" and isinstance(total.func, cst.Attribute):
        summed, rest = _strip(total.func.value), list(total.args)
    elif kind == "function" and name in _SUM_NAMES and total.args:
        summed, rest = _strip(total.args[0].value), list(total.args[1:])
    else:
        return None
    inner = ctx.index.callee(summed)
    if inner is None or not isinstance(summed, cst.Call):
        return None
    ikind, iname = inner
    if ikind == "method" and iname == "exp" and isinstance(summed.func, cst.Attribute) and not summed.args:
        x = summed.func.value
        dims = [a for a in rest if a.keyword is None or a.keyword.value in ("dim", "keepdim")]
        if len(dims) != len(rest):
            return None
        if not dims:
            return _method(_method(x, "flatten"), "logsumexp", "0")
        return cst.Call(func=cst.Attribute(value=_atom(x), attr=cst.Name("logsumexp")), args=dims)
    if (
        ikind == "function"
        and iname in _EXP_NAMES
        and len(summed.args) == 1
        and isinstance(summed.func, cst.Attribute)
    ):
        x = summed.args[0].value
        ns = _dotted(summed.func.value)
        if not rest:
            return _call(f"{ns}.logsumexp", _method(x, "flatten"), "0")
        if any(a.keyword is not None and a.keyword.value not in ("dim", "keepdim") for a in rest):
            return None
        args = [cst.Arg(x)] + [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest]
        return cst.Call(func=_expr(f"{ns}.logsumexp"), args=_commas(args))
    return None


def _log1p_fixes(ctx: _Context) -> list[_Proposal]:
    eps = _num(ctx.eps1)
    return _clamp_fix(ctx, lo_text=f"-1 + {eps}", words=f"to >= -1 + {eps}")
