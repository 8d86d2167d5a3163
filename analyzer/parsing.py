"""Python source to an ``ast`` tree, safe from any thread: the one way grist-lsp calls ``ast.parse``.

CPython 3.11 counts the depth of the tree it is turning into Python objects in one counter per
interpreter, not per thread. When the collector runs a finalizer in the middle of that, another
thread can take the GIL and parse too, and the first parse then fails with ``SystemError: AST
constructor recursion depth mismatch`` (CPython issue gh-106905). The CLI parses files on several
threads and the server parses beside its checks, so one lock serialises the parses; they hold the
GIL anyway, so it costs no parallelism.

``ruff`` bans ``ast.parse`` everywhere else (``pyproject.toml``, ``banned-api``).
"""

from __future__ import annotations

import ast
import threading

# Not state: it guards the interpreter's own counter, which is process-wide.
_PARSE_LOCK = threading.Lock()

UNPARSABLE: tuple[type[Exception], ...] = (SyntaxError, ValueError, RecursionError, MemoryError)
"""What ``parse`` raises for text it cannot make a tree of: bad syntax; the ``ValueError`` some
CPython versions raise for a null byte; nesting deeper than the tree builder goes (``-``
repeated a few thousand times is enough); a file too big for memory. A caller asking a question
of a file (is it a script? what does it import?) answers "no" to all four rather than stop."""


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(text, filename)``; raises one of ``UNPARSABLE`` when it cannot."""
    with _PARSE_LOCK:
        return ast.parse(text, filename=filename)  # noqa: TID251 - the one call the ban allows
