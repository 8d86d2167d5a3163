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
