"""What a file does when it runs, read from its source alone (no torch import).

The engine picks how to enter and search a program by its shape; these questions are
static, so the parent process (CLI, server) can ask them without importing torch.
"""

from __future__ import annotations

import ast

from grist_lsp.analyzer.parsing import UNPARSABLE, parse


def is_test_file(name: str) -> bool:
    """pytest's default test file names: ``test_*.py`` and ``*_test.py``."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def has_training_loop(text: str) -> bool:
    """True when the source has a ``for``/``while`` loop whose body calls ``backward``: a
    program that trains, where GRIST's own mode (``dynamic/training.py``) applies."""
    try:
        tree = parse(text)
    except UNPARSABLE:
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr == "backward"
                ):
                    return True
    return False


def is_script(text: str) -> bool:
    """True when the file does something when run: top-level statements beyond definitions."""
    try:
        tree = parse(text)
    except UNPARSABLE:
        return False
    for node in tree.body:
        if isinstance(
            node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
            node.value, (ast.Constant, ast.Name, ast.Attribute)
        ):
            continue
        return True
    return False


ENTRY_CONTRACT = (
    "an entry function takes no arguments and returns (callable, args) or (callable, args, kwargs)"
)


def may_define(text: str, dotted: str) -> bool:
    """False only when the source surely binds no ``dotted`` name (``f``, or ``Class.method``)
    at its top level: an explicit entry naming it cannot work, and saying so needs no run.

    Any binding counts (``def``, ``class``, an assignment, an import, a loop or ``with``
    target), in ``if``/``try``/``with`` blocks too. What the source cannot tell (``from m
    import *``, a module ``__getattr__``, a ``global`` statement, an attribute of something
    not a plain class here, a file that does not parse) answers True: the worker then decides."""
    try:
        tree = parse(text)
    except UNPARSABLE:
        return True
    if any(isinstance(node, ast.Global) for node in ast.walk(tree)):
        return True
    scope: list[ast.stmt] = tree.body
    for depth, part in enumerate(dotted.split(".")):
        bound = _bindings(scope)
        if bound is None or (depth == 0 and "__getattr__" in bound):
            return True
        if part not in bound:
            return False
        node = bound[part]
        if not isinstance(node, ast.ClassDef) or node.bases or node.keywords or node.decorator_list:
            return True  # an attribute of a value, or one a base class may give: only a run can tell
        scope = node.body
    return True


def _bindings(body: list[ast.stmt]) -> dict[str, ast.AST] | None:
    """The names ``body`` binds at its own level (blocks that run in it included), each with the
    statement that binds it last; None when a star import makes the set unknowable."""
    bound: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound[alias.asname or alias.name.split(".")[0]] = node
        else:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    bound.setdefault(inner.id, node)
                elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.setdefault(inner.name, inner)
                elif isinstance(inner, (ast.Import, ast.ImportFrom)):
                    if any(alias.name == "*" for alias in inner.names):
                        return None
                    for alias in inner.names:
                        bound.setdefault(alias.asname or alias.name.split(".")[0], inner)
    return bound
