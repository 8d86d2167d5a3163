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
its own function, or kept in an attribute is decided at run time too, as is one that is emptied again
(``clear``, ``pop``, ``remove``, ``del lst[...]``, a second ``lst = []``), read inside the loop that
grows it (the first pass reads it before it grows), grown by ``extend``/``+=`` (which may add
nothing) or in a loop over an iterable that may itself be empty (asked of ``provenance.py``).

One walk of the module, on first use; answers per (function, list name).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

_ONE_ITEM = frozenset({"append", "insert", "appendleft"})  # add exactly one element
_SOME_ITEMS = frozenset({"extend", "extendleft"})  # add what their argument holds: maybe nothing
_EMPTIERS = frozenset({"clear", "pop", "popleft", "remove"})
_HARMLESS = frozenset({"len", "list", "tuple", "sum", "sorted", "enumerate", "zip", "print", "reversed"})
_Scope = ast.AST  # a FunctionDef, AsyncFunctionDef, Lambda or the Module
_Loop = ast.For | ast.AsyncFor | ast.While


@dataclass
class _Growth:
    # The loops around each growth that runs on every pass of them (innermost last); a growth
    # under a condition is counted in ``conditional`` only.
    every_pass: list[tuple[_Loop, ...]] = field(default_factory=list)
    # ... and each ``name += value`` of a value that is no literal: a count grows by it, a list
    # may grow by nothing
    every_pass_added: list[tuple[_Loop, ...]] = field(default_factory=list)
    conditional: bool = False
    escapes: bool = False  # handed to code of the program (which may clear it or fill it)
    emptied: bool = False  # cleared, popped or deleted from (a new ``name = []``: ``bound``)
    bound: int = 0  # ``name = [...]`` statements in the scope


@dataclass
class ListGrowth:
    tree: ast.Module
    # Whether a loop's iterable may have no item (``provenance.may_be_empty``'s answer).
    may_be_empty: Callable[[ast.AST], bool]
    _scopes: dict[int, _Scope] = field(default_factory=dict)  # id(assigned value) -> its scope
    _growth: dict[tuple[int, str], _Growth] = field(default_factory=dict)
    _walked: bool = False

    def may_stay_empty(
        self,
        value: ast.AST,
        name: str,
        use: ast.AST | None = None,
        count: bool = False,
    ) -> bool:
        """Whether the list that ``name = value`` binds (``lst = []``) may have no element where
        ``use`` reads it: it grows only under a condition or in a loop ``use`` is inside of, is
        emptied again, escapes to other code, or never grows. ``count``: ``name`` is a number (``total = 0``) that ``+=``
        grows, not a list that ``+= other`` may leave as it was."""
        if not self._walked:
            self._walk(self.tree, self.tree, conditional=False, loops=())
            self._walked = True
        scope = self._scopes.get(id(value))
        if scope is None:
            return True
        g = self._growth.get((id(scope), name))
        if g is None or g.conditional or g.escapes or g.emptied or g.bound > 1:
            return True
        passes = [*g.every_pass, *(g.every_pass_added if count else [])]
        # only the loops between the binding and the growth: a list made anew on each pass of an
        # outer loop is read on the pass that made it
        inner = [tuple(loop for loop in loops if not _inside(value, loop)) for loops in passes]
        return not any(self._runs_before(loops, use) for loops in inner)

    def _runs_before(self, loops: tuple[_Loop, ...], use: ast.AST | None) -> bool:
        """Whether a growth inside ``loops`` has run once the program reaches ``use``."""
        for loop in loops:
            if use is not None and _inside(use, loop):
                return False  # read on a pass of the loop that grows it: the first pass reads first
            if not isinstance(loop, ast.While) and self.may_be_empty(loop.iter):
                return False
        return True

    def _walk(self, node: ast.AST, scope: _Scope, conditional: bool, loops: tuple[_Loop, ...]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not scope:
            self._walk_children(node, node, conditional=False, loops=())
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            self._scopes[id(node.value)] = scope
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and isinstance(node.value, ast.List):
                    self._of(scope, t.id).bound += 1
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            # lst += [x] adds one; total += n grows a count (size_divisors.py asks), lst += other maybe nothing
            literal = node.value if isinstance(node.value, (ast.List, ast.Tuple)) else None
            if literal is not None and not literal.elts:
                pass  # lst += []: nothing
            elif literal is not None:
                self._grows(scope, node.target.id, conditional, loops)
            elif conditional:
                self._of(scope, node.target.id).conditional = True
            else:
                self._of(scope, node.target.id).every_pass_added.append(loops)
        if isinstance(node, ast.Delete):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    self._of(scope, t.value.id).emptied = True
        if isinstance(node, ast.Call):
            self._call(node, scope, conditional, loops)
        if isinstance(node, (ast.If, ast.Try, ast.Match, ast.IfExp)) and not _main_guard(node):
            self._walk_children(node, scope, conditional=True, loops=loops)
            return
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self._walk(node.test if isinstance(node, ast.While) else node.iter, scope, conditional, loops)
            self._walk_body(node.body, scope, conditional, (*loops, node))
            self._walk_body(node.orelse, scope, True, loops)
            return
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self._walk(item, scope, conditional, loops)
            self._walk_body(node.body, scope, conditional, loops)
            return
        self._walk_children(node, scope, conditional, loops)

    def _walk_body(
        self, body: list[ast.stmt], scope: _Scope, conditional: bool, loops: tuple[_Loop, ...]
    ) -> None:
        """A block in order: past an ``if ...: break/continue/return`` the statements after it may
        not run on a pass."""
        for stmt in body:
            self._walk(stmt, scope, conditional, loops)
            conditional = conditional or _leaves_early(stmt)

    def _walk_children(
        self, node: ast.AST, scope: _Scope, conditional: bool, loops: tuple[_Loop, ...]
    ) -> None:
        for child in ast.iter_child_nodes(node):
            self._walk(child, scope, conditional, loops)

    def _call(self, call: ast.Call, scope: _Scope, conditional: bool, loops: tuple[_Loop, ...]) -> None:
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.attr in _ONE_ITEM:
                self._grows(scope, f.value.id, conditional, loops)
            elif f.attr in _SOME_ITEMS:
                self._grows(scope, f.value.id, True, loops)
            elif f.attr in _EMPTIERS:
                self._of(scope, f.value.id).emptied = True
        # a function or method of the program given the list (fill(lst), self.fill(lst)) may fill
        # or clear it; a library's (torch.stack(lst), np.array(lst)) does neither
        program = (isinstance(f, ast.Name) and f.id not in _HARMLESS) or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls")
        )
        if program:
            for a in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(a, ast.Name):
                    self._of(scope, a.id).escapes = True

    def _of(self, scope: _Scope, name: str) -> _Growth:
        return self._growth.setdefault((id(scope), name), _Growth())

    def _grows(self, scope: _Scope, name: str, conditional: bool, loops: tuple[_Loop, ...]) -> None:
        g = self._of(scope, name)
        if conditional:
            g.conditional = True
        else:
            g.every_pass.append(loops)


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    start, end = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", None) or 0
    line = getattr(node, "lineno", -1)
    return start <= line <= end


def _leaves_early(stmt: ast.stmt) -> bool:
    """A statement that may end a pass of the loop around it: a ``break``, ``continue`` or
    ``return`` under a condition of its own (not inside a nested loop, whose break is its own)."""
    if not isinstance(stmt, (ast.If, ast.Try, ast.Match, ast.With, ast.AsyncWith)):
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
