"""Infinities the program repairs the moment it makes them.

Graph code normalises by degree and resets what a zero degree gives before anything reads it::

    r_inv = 1 / rowsum
    r_inv[torch.isinf(r_inv)] = 0          # or r_inv == float('inf'), ~torch.isfinite(r_inv),
                                           # r_inv.masked_fill_(...), r_inv = torch.nan_to_num(r_inv)

A division (or a negative power) whose only invalid result is an infinity, bound to a name by its
statement and reset to a finite value by the very next statement, leaves no INF for the program
to read. It still leaves one in the backward pass when the value carries a gradient (the reset
entries' gradient is 0 * inf = NaN), so ``reset_after`` answers only for values computed from data
alone (``Data``: literals, numpy, torch ops on such values, nothing from a parameter, an attribute
or a module), which carry none.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from grist_lsp.analyzer.dataflow import DataFlow
from grist_lsp.analyzer.names import Resolver

# A value computed by these from an infinity is still the infinity (where it was one): the
# repair of the name catches it (``torch.sqrt(1 / deg)``, ``np.power(s, -1).flatten()``).
_KEEPS_INF = frozenset(
    {"sqrt", "flatten", "view", "reshape", "squeeze", "unsqueeze", "float", "double", "to", "ravel", "abs"}
)
# Tensor methods whose result carries no gradient, whatever the tensor: they end it, or leave torch.
_NO_GRAD_METHODS = frozenset({"detach", "numpy", "item", "tolist"})
_DEPTH = 12  # definitions followed back from a value


@dataclass
class Data:
    """Whether an expression is computed from data alone, so carries no gradient: literals,
    numpy (which has no autograd), torch functions and Tensor methods applied to such values
    (without ``requires_grad``), Python builtins. A parameter, ``self.``-attribute, loop variable
    or any other call is not evidence of data: the answer is then False."""

    flow: DataFlow
    resolver: Resolver
    _memo: dict[int, bool] = field(default_factory=dict)

    def __call__(self, e: ast.AST, depth: int = 0) -> bool:
        """``depth`` counts the definitions followed (a name to its value), not the tree's nesting."""
        key = id(e)
        if key not in self._memo:
            self._memo[key] = False  # a cycle is no evidence
            self._memo[key] = depth <= _DEPTH and self._data(e, depth)
        return self._memo[key]

    def _data(self, e: ast.AST, depth: int) -> bool:
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, (ast.Name, ast.Attribute)) and self.resolver.qualified_name(e) is not None:
            return True  # a module's name or constant (np.int32, torch.float32)
        if isinstance(e, ast.Name):
            if not self.flow.is_use(e):
                return False
            defs = self.flow.defs_reaching(e)
            return bool(defs) and all(
                d.how in ("assign", "walrus", "unpack", "mutate")
                and d.value is not None
                and self(d.value, depth + 1)
                for d in defs
            )
        if isinstance(e, ast.Call):
            return self._call(e, depth)
        if isinstance(e, ast.Attribute):
            return self(e.value, depth + 1)  # x.T, x.shape
        if isinstance(
            e, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript, ast.Tuple, ast.List, ast.Slice)
        ):
            return all(
                self(child, depth + 1) for child in ast.iter_child_nodes(e) if isinstance(child, ast.expr)
            )
        return False

    def _call(self, call: ast.Call, depth: int) -> bool:
        if any(k.arg == "requires_grad" for k in call.keywords):
            return False
        qualified = self.resolver.qualified_name(call.func)
        if qualified is not None:
            if qualified.split(".")[0] == "numpy":
                return True  # numpy has no autograd, whatever it is given
            if qualified.startswith(("torch.nn", "torch.autograd")) or not qualified.startswith(
                ("torch.", "builtins.")
            ):
                return False
            return all(self(a, depth) for a in [*call.args, *(k.value for k in call.keywords)])
        f = call.func
        if isinstance(f, ast.Name) and f.id in ("len", "int", "float", "range", "open", "list", "sorted"):
            return True
        if not isinstance(f, ast.Attribute) or f.attr == "requires_grad_":
            return False
        if f.attr in _NO_GRAD_METHODS:
            return True
        return self(f.value, depth) and all(self(a, depth) for a in call.args)


@dataclass
class Repairs:
    """Which sites' infinities the next statement resets (``reset_after``)."""

    tree: ast.Module
    flow: DataFlow
    resolver: Resolver
    # line -> the assignments starting there, each with the statement after it in its block
    _next: dict[int, list[tuple[ast.Assign, ast.stmt | None]]] | None = None
    _data: Data | None = None

    def reset_after(self, node: ast.AST) -> str | None:
        """Words naming the reset when the value of ``node`` (an op whose only invalid result is an
        infinity) is bound to a name whose infinities the next statement resets, and it is
        computed from data alone; else None."""
        found = self._statement_of(node)
        if found is None:
            return None
        stmt, following = found
        if len(stmt.targets) != 1 or following is None:
            return None
        target = stmt.targets[0]
        if not isinstance(target, ast.Name) or not _keeps_inf(stmt.value, node):
            return None
        if not _resets(following, target.id):
            return None
        if self._data is None:
            self._data = Data(self.flow, self.resolver)
        if not self._data(stmt.value):
            return None
        return f"`{ast.unparse(following).splitlines()[0]}` on line {following.lineno}"

    def _statement_of(self, node: ast.AST) -> tuple[ast.Assign, ast.stmt | None] | None:
        """The assignment whose value holds ``node``, and the statement after it in its block."""
        if self._next is None:
            self._next = {}
            for parent in ast.walk(self.tree):
                for name in ("body", "orelse", "finalbody"):
                    block = getattr(parent, name, None)
                    if not isinstance(block, list):
                        continue
                    for k, stmt in enumerate(block):
                        if isinstance(stmt, ast.Assign):
                            following = block[k + 1] if k + 1 < len(block) else None
                            self._next.setdefault(stmt.lineno, []).append((stmt, following))
        for stmt, following in self._next.get(getattr(node, "lineno", -1), []):
            if _inside(node, stmt.value):
                return stmt, following
        return None


def _inside(node: ast.AST, expr: ast.AST) -> bool:
    return any(n is node for n in ast.walk(expr))


def _keeps_inf(value: ast.AST, node: ast.AST) -> bool:
    """``value`` is ``node`` itself, or ``node`` under calls that keep an infinity one."""
    while value is not node:
        if not isinstance(value, ast.Call):
            return False
        f = value.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name not in _KEEPS_INF:
            return False
        if isinstance(f, ast.Attribute) and _inside(node, f.value):
            value = f.value  # x.flatten(), x.sqrt()
        elif value.args and _inside(node, value.args[0]):
            value = value.args[0]  # torch.sqrt(x)
        else:
            return False
    return True


def _resets(stmt: ast.stmt, name: str) -> bool:
    """``stmt`` sets every infinity of ``name`` to a finite constant."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Subscript) and _is_name(target.value, name):
            return _finite_constant(value) and _inf_mask(target.slice, name)  # v[isinf(v)] = 0
        if _is_name(target, name) and isinstance(value, ast.Call):
            called = _called(value)
            if called == "nan_to_num" and value.args and _is_name(value.args[0], name):
                return True  # v = torch.nan_to_num(v)
            if called == "where" and len(value.args) == 3:  # v = torch.where(isinf(v), 0, v)
                cond, fill, keep = value.args
                return _inf_mask(cond, name) and _finite_constant(fill) and _is_name(keep, name)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call, f = stmt.value, stmt.value.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr in ("masked_fill_", "nan_to_num_")
            and _is_name(f.value, name)
        ):
            if f.attr == "nan_to_num_":
                return True
            return len(call.args) == 2 and _inf_mask(call.args[0], name) and _finite_constant(call.args[1])
    return False


def _called(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _is_name(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _finite_constant(e: ast.AST) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and abs(e.value) != float("inf")


def _is_inf(e: ast.AST) -> bool:
    """``float('inf')``, ``math.inf``, ``np.inf``, ``torch.inf``, ``float("Inf")``."""
    if isinstance(e, ast.Call) and _called(e) == "float" and e.args and isinstance(e.args[0], ast.Constant):
        return str(e.args[0].value).lower() in ("inf", "+inf", "infinity")
    return isinstance(e, ast.Attribute) and e.attr == "inf"


def _inf_mask(e: ast.AST, name: str) -> bool:
    """``e`` is True at the infinities of ``name``: ``isinf(v)``, ``v.isinf()``, ``v == inf``,
    ``~isfinite(v)``, ``torch.isinf(v) | torch.isnan(v)``."""
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], ast.Eq):
        sides = (e.left, e.comparators[0])
        return any(_is_name(a, name) and _is_inf(b) for a, b in (sides, sides[::-1]))
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
        return _inf_mask(e.left, name) or _inf_mask(e.right, name)
    if (
        isinstance(e, ast.UnaryOp)
        and isinstance(e.op, (ast.Invert, ast.Not))
        and isinstance(e.operand, ast.Call)
    ):
        return _called(e.operand) == "isfinite" and _about(e.operand, name)
    if isinstance(e, ast.Call):
        return _called(e) == "isinf" and _about(e, name)
    return False


def _about(call: ast.Call, name: str) -> bool:
    """The call's tensor is ``name``: ``torch.isinf(v)`` or ``v.isinf()``."""
    f = call.func
    if isinstance(f, ast.Attribute) and _is_name(f.value, name) and not call.args:
        return True
    return bool(call.args) and _is_name(call.args[0], name)
