"""What a file does when it runs, read from its source alone (no torch import).

The engine picks how to enter and search a program by its shape; these questions are
static, so the parent process (CLI, server) can ask them without importing torch.
"""

from __future__ import annotations

import ast


def has_training_loop(text: str) -> bool:
    """True when the source has a ``for``/``while`` loop whose body calls ``backward``: a
    program that trains, where GRIST's own mode (``dynamic/training.py``) applies."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                        and inner.func.attr == "backward":
                    return True
    return False
