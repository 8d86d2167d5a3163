"""Whether a list the program builds at run time may end up empty.

``torch.tensor(lst)``, ``torch.cat(lst)`` and ``torch.stack(lst)`` of a list that got no element
give an empty tensor, and its mean is NaN. A list grows by ``append``/``extend``/``insert``/``+=``;
it may stay empty when one of them runs only under a condition: in an ``if`` or ``match`` branch
(not ``if __name__ == "__main__"``), a ``try``/``except`` block, a loop's ``else``, or after an
``if ...: break/continue/return`` earlier in the same loop body (a filtered comprehension,
``[x for x in xs if ok(x)]``, is judged where it is built). A loop's body is not a condition: a
``for`` loop's iterable is assumed to have an item and a ``while`` loop's test to hold at first,
as a parameter of unknown shape is assumed non-empty elsewhere in the static pass. A list passed
to a function of the program (which may clear it, or be the one that fills it), grown nowhere in
its own function, or kept in an attribute is decided at run time too.

One walk of the module, on first use; answers per (function, list name).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

_GROWERS = frozenset({"append", "extend", "insert", "appendleft", "extendleft"})
_Scope = ast.AST  # a FunctionDef, AsyncFunctionDef, Lambda or the Module


@dataclass
class _Growth:
    unconditional: bool = False
    conditional: bool = False
    escapes: bool = False  # handed to a call that is not a list/tensor operation


@dataclass
class ListGrowth:
    tree: ast.Module
    _scopes: dict[int, _Scope] = field(default_factory=dict)  # id(assigned value) -> its scope
    _growth: dict[tuple[int, str], _Growth] = field(default_factory=dict)
    _walked: bool = False

    def may_stay_empty(self, value: ast.AST, name: str) -> bool:
        """Whether the list that ``name = value`` binds (``lst = []``) may have no element when it
        is read: it grows only under a condition, escapes to other code, or never grows."""
        if not self._walked:
            self._walk(self.tree, self.tree, conditional=False)
            self._walked = True
        scope = self._scopes.get(id(value))
        if scope is None:
            return True
        growth = self._growth.get((id(scope), name))
        return growth is None or growth.conditional or growth.escapes or not growth.unconditional

    def _walk(self, node: ast.AST, scope: _Scope, conditional: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not scope:
            self._walk_children(node, node, conditional=False)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            self._scopes[id(node.value)] = scope
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self._grows(scope, node.target.id, conditional)
        if isinstance(node, ast.Call):
            self._call(node, scope, conditional)
        if isinstance(node, (ast.If, ast.Try, ast.Match, ast.IfExp)) and not _main_guard(node):
            self._walk_children(node, scope, conditional=True)
            return
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self._walk(node.test if isinstance(node, ast.While) else node.iter, scope, conditional)
            self._walk_body(node.body, scope, conditional)
            self._walk_body(node.orelse, scope, conditional=True)
            return
        self._walk_children(node, scope, conditional)

    def _walk_body(self, body: list[ast.stmt], scope: _Scope, conditional: bool) -> None:
        """A loop's body in order: past an ``if ...: break/continue/return`` an iteration may have
        ended before the statement runs."""
        for stmt in body:
            self._walk(stmt, scope, conditional)
            conditional = conditional or _leaves_early(stmt)

    def _walk_children(self, node: ast.AST, scope: _Scope, conditional: bool) -> None:
        for child in ast.iter_child_nodes(node):
            self._walk(child, scope, conditional)

    def _call(self, call: ast.Call, scope: _Scope, conditional: bool) -> None:
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in _GROWERS:
            self._grows(scope, f.value.id, conditional)
        if isinstance(f, ast.Name) and f.id not in (
            "len",
            "list",
            "tuple",
            "sum",
            "sorted",
            "enumerate",
            "zip",
        ):
            # a function of the program (or an unknown one) given the list may fill or clear it
            for a in call.args:
                if isinstance(a, ast.Name):
                    self._growth.setdefault((id(scope), a.id), _Growth()).escapes = True

    def _grows(self, scope: _Scope, name: str, conditional: bool) -> None:
        g = self._growth.setdefault((id(scope), name), _Growth())
        if conditional:
            g.conditional = True
        else:
            g.unconditional = True


def _leaves_early(stmt: ast.stmt) -> bool:
    """A statement of a loop body that may end the iteration: a ``break``, ``continue`` or
    ``return`` under a condition of its own (not inside a nested loop, whose break is its own)."""
    if not isinstance(stmt, (ast.If, ast.Try, ast.Match)):
        return False
    todo: list[ast.AST] = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Break, ast.Continue, ast.Return)):
            return True
        if not isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(ast.iter_child_nodes(n))
    return False


def _main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``: how a script runs, not a condition on data."""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and not node.orelse
    )
