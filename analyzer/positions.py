"""Source positions for the static pass: CPython's UTF-8 byte columns -> model.Span.

The parser (``ast``) reports the same line/column pairs CPython stores in
``co_positions`` (the tracer matches runtime events by them), but columns are
UTF-8 byte offsets; the data model wants 0-based code points. This module owns
that conversion and the source text of a span.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from grist_lsp.model import Span

# CPython's tokenizer breaks lines on \n, \r\n and a lone \r only (not on the
# other characters str.splitlines() knows, such as \x0c or \u2028).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# The node classes that carry a source position (``ast.AST`` itself declares none).
_LOCATED = (ast.expr, ast.stmt, ast.excepthandler, ast.arg, ast.keyword, ast.alias, ast.pattern)


@dataclass
class SourceLines:
    """The lines of one source text, with byte->code-point column conversion."""

    text: str
    lines: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = _LINE_BREAK.split(self.text)

    def line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    def col(self, lineno: int, byte_col: int) -> int:
        """Code-point column of a UTF-8 byte offset on a 1-based line."""
        text = self.line(lineno)
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> Span:
        if not isinstance(node, _LOCATED):
            raise TypeError(f"a {type(node).__name__} node has no source position to make a span of")
        start_line = node.lineno
        end_line = node.end_lineno or start_line
        return Span(
            start_line,
            self.col(start_line, node.col_offset),
            end_line,
            self.col(end_line, node.end_col_offset or 0),
        )

    def text_of(self, span: Span) -> str:
        if span.start_line == span.end_line:
            return self.line(span.start_line)[span.start_col : span.end_col]
        parts = [self.line(span.start_line)[span.start_col :]]
        parts += [self.line(n) for n in range(span.start_line + 1, span.end_line)]
        parts.append(self.line(span.end_line)[: span.end_col])
        return "\n".join(parts)


def node_words(e: ast.AST, fallback: str) -> str:
    """A node's source, cut to 40 characters, for the words of a reason; ``fallback`` when
    ``ast.unparse`` cannot render it (it is best effort on odd trees)."""
    try:
        text = ast.unparse(e)
    except Exception:
        return fallback
    return text if len(text) <= 40 else text[:37] + "..."


def int_literal(e: ast.AST | None) -> int | None:
    """An integer literal (-1 included), else None."""
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return e.value
    if (
        isinstance(e, ast.UnaryOp)
        and isinstance(e.op, ast.USub)
        and isinstance(e.operand, ast.Constant)
        and type(e.operand.value) is int
    ):
        return -e.operand.value
    return None
