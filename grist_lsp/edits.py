"""Apply `Fix` text edits to source text and render them as a unified diff.

Spans use the model's convention (1-based lines, 0-based code-point columns,
end exclusive), so offsets are computed on `str` code points, never bytes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from grist_lsp.model import Fix, Span, TextEdit


@dataclass
class AppliedFixes:
    """The new text and which fixes made it in (overlapping ones are left out)."""

    text: str
    applied: list[Fix]
    skipped: list[Fix]


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def offset(text: str, line: int, col: int, starts: list[int] | None = None) -> int:
    """Code-point offset of a (1-based line, 0-based column) position, clamped to the text."""
    starts = starts if starts is not None else _line_starts(text)
    if line < 1:
        return 0
    if line > len(starts):
        return len(text)
    return min(starts[line - 1] + col, len(text))


def _range(text: str, span: Span, starts: list[int]) -> tuple[int, int]:
    return offset(text, span.start_line, span.start_col, starts), offset(text, span.end_line, span.end_col, starts)


def apply_fixes(text: str, fixes: list[Fix]) -> AppliedFixes:
    """Apply whole fixes in order; a fix whose edits overlap an earlier one is skipped entirely.

    Skipping (rather than merging) is deliberate: each fix was verified on its
    own, and a half-applied fix is not the code the engine re-checked.
    """
    starts = _line_starts(text)
    taken: list[tuple[int, int]] = []
    chosen: list[tuple[int, int, TextEdit]] = []
    applied: list[Fix] = []
    skipped: list[Fix] = []
    for fix in fixes:
        ranges = [(*_range(text, edit.span, starts), edit) for edit in fix.edits]
        clash = any(
            lo < t_hi and t_lo < hi or (lo == hi == t_lo == t_hi)
            for lo, hi, _ in ranges
            for t_lo, t_hi in taken
        )
        if clash or not ranges:
            skipped.append(fix)
            continue
        taken.extend((lo, hi) for lo, hi, _ in ranges)
        chosen.extend(ranges)
        applied.append(fix)
    # Apply from the end so earlier offsets stay valid.
    for lo, hi, edit in sorted(chosen, key=lambda r: (r[0], r[1]), reverse=True):
        text = text[:lo] + edit.new_text + text[hi:]
    return AppliedFixes(text=text, applied=applied, skipped=skipped)


def unified_diff(path: str, before: str, after: str) -> str:
    """A `git diff`-style patch of one file ('' when nothing changed)."""
    if before == after:
        return ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
