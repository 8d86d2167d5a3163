"""Text edits: apply `TextEdit`s and whole `Fix`es to source text, and render unified diffs.

The one place positions become string offsets. Spans use the model's convention (1-based lines,
0-based code-point columns, end exclusive), so offsets are computed on `str` code points, never
bytes. Used by the CLI's `--fix`/`--diff`, the fix verifier and the tests.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from grist_lsp.model import Fix, TextEdit


class EditError(ValueError):
    """Edits that overlap or point outside the text."""


@dataclass
class AppliedFixes:
    """The new text and which fixes made it in (overlapping ones are left out)."""

    text: str
    applied: list[Fix]
    skipped: list[Fix]


def line_starts(text: str) -> list[int]:
    """Offset of the first code point of each line."""
    starts = [0]
    starts.extend(i + 1 for i, ch in enumerate(text) if ch == "\n")
    return starts


def offset(starts: list[int], text: str, line: int, col: int) -> int:
    """Code-point offset of (1-based line, 0-based column); ``EditError`` outside the text."""
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


def _ranges(text: str, edits: list[TextEdit], starts: list[int]) -> list[tuple[int, int, int, str]]:
    out = []
    for order, edit in enumerate(edits):
        lo = offset(starts, text, edit.span.start_line, edit.span.start_col)
        hi = offset(starts, text, edit.span.end_line, edit.span.end_col)
        if hi < lo:
            raise EditError(f"edit span {edit.span} ends before it starts")
        out.append((lo, hi, order, edit.new_text))
    return out


def apply_edits(text: str, edits: list[TextEdit]) -> str:
    """``text`` with ``edits`` applied (all positions relative to the original text).

    Insertions at the same position keep their list order; overlapping replacements raise
    ``EditError`` rather than guessing.
    """
    ranges = sorted(_ranges(text, edits, line_starts(text)))
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


def apply_fixes(text: str, fixes: list[Fix]) -> AppliedFixes:
    """Apply whole fixes in order; a fix whose edits overlap an earlier one is skipped entirely.

    Skipping (rather than merging) is deliberate: each fix was verified on its
    own, and a half-applied fix is not the code the engine re-checked.
    """
    starts = line_starts(text)
    taken: list[tuple[int, int]] = []
    chosen: list[TextEdit] = []
    applied: list[Fix] = []
    skipped: list[Fix] = []
    for fix in fixes:
        try:
            ranges = [(lo, hi) for lo, hi, _, _ in _ranges(text, fix.edits, starts)]
        except EditError:
            ranges = []  # written for another version of the text
        clash = any(
            lo < t_hi and t_lo < hi or (lo == hi == t_lo == t_hi) for lo, hi in ranges for t_lo, t_hi in taken
        )
        if clash or not ranges:
            skipped.append(fix)
            continue
        taken.extend(ranges)
        chosen.extend(fix.edits)
        applied.append(fix)
    return AppliedFixes(text=apply_edits(text, chosen), applied=applied, skipped=skipped)


def unified_diff(path: str, before: str, after: str) -> str:
    """A `git diff`-style patch of one file ('' when nothing changed)."""
    if before == after:
        return ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
