"""Re-check proposed fixes: apply each to a copy of the text, re-run static + engine + replay.

``fix_verdicts`` is the only place a ``Fix`` becomes ``verified``; ``apply_edits`` is the one
helper every caller (CLI ``--fix``, server, tests) uses to turn edits into text.
"""

from __future__ import annotations

from grist_lsp.model import Span, TextEdit


class EditError(ValueError):
    """Edits that overlap or point outside the text."""


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(i + 1 for i, ch in enumerate(text) if ch == "\n")
    return starts


def _offset(starts: list[int], text: str, line: int, col: int) -> int:
    if line < 1 or line > len(starts) + 1:
        raise EditError(f"edit position {line}:{col} is outside the text ({len(starts)} lines)")
    if line == len(starts) + 1:  # one past the last line: only its start is meaningful
        if col != 0:
            raise EditError(f"edit position {line}:{col} is outside the text ({len(starts)} lines)")
        return len(text)
    line_end = starts[line] - 1 if line < len(starts) else len(text)
    if col > line_end - starts[line - 1] + (1 if line < len(starts) else 0):
        raise EditError(f"edit column {line}:{col} is past the end of the line")
    return starts[line - 1] + col


def apply_edits(text: str, edits: list[TextEdit]) -> str:
    """``text`` with ``edits`` applied (positions in the model's convention, all relative to
    the original text). Insertions at the same position keep their list order; overlapping
    replacements raise ``EditError`` rather than guessing.
    """
    starts = _line_starts(text)
    ranges = []
    for order, edit in enumerate(edits):
        lo = _offset(starts, text, edit.span.start_line, edit.span.start_col)
        hi = _offset(starts, text, edit.span.end_line, edit.span.end_col)
        if hi < lo:
            raise EditError(f"edit span {edit.span} ends before it starts")
        ranges.append((lo, hi, order, edit.new_text))
    ranges.sort()
    for (lo1, hi1, _, _), (lo2, hi2, _, _) in zip(ranges, ranges[1:]):
        if lo2 < hi1 or (lo2 == lo1 and hi1 > lo1 and hi2 > lo2):
            raise EditError("edits overlap; apply them one fix at a time")
    out = []
    cursor = 0
    for lo, hi, _, new_text in ranges:
        out.append(text[cursor:lo])
        out.append(new_text)
        cursor = hi
    out.append(text[cursor:])
    return "".join(out)


def shift_span(span: Span, edits: list[TextEdit], text: str) -> Span | None:
    """Where ``span`` of the original text lies after ``edits``; None if an edit overlaps it."""
    starts = _line_starts(text)
    lo = _offset(starts, text, span.start_line, span.start_col)
    hi = _offset(starts, text, span.end_line, span.end_col)
    delta_lo = delta_hi = 0
    for edit in edits:
        e_lo = _offset(starts, text, edit.span.start_line, edit.span.start_col)
        e_hi = _offset(starts, text, edit.span.end_line, edit.span.end_col)
        change = len(edit.new_text) - (e_hi - e_lo)
        if e_hi <= lo and not (e_lo == e_hi == lo and False):
            delta_lo += change
            delta_hi += change
        elif e_lo >= hi:
            continue
        else:
            return None
    new_text = apply_edits(text, edits)
    return _span_of(new_text, lo + delta_lo, hi + delta_hi)


def _span_of(text: str, lo: int, hi: int) -> Span:
    starts = _line_starts(text)

    def pos(offset: int) -> tuple[int, int]:
        import bisect
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1]

    (l1, c1), (l2, c2) = pos(lo), pos(hi)
    return Span(l1, c1, l2, c2)
