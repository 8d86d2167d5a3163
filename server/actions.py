"""Code actions (quick fixes, "Ignore GRIST### on this line", "Create reproducer test", "Re-check") and their edits.

Pure functions of the published diagnostics and the text: the server looks up
what is published for the document now (never trusting a stale ``data`` payload
from the client for spans) and turns fixes into workspace edits in the client's
position units.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Callable, Sequence
from pathlib import Path

from lsprotocol import types

from grist_lsp.model import Fix, Span, Status, Verdict
from grist_lsp.server.diagnostics import Published, split_lines, to_position
from grist_lsp.suppressions import comment_tokens, extend_comment, finding_code, is_directive, new_comment

RECHECK = "grist.recheck"
CREATE_REPRODUCER = "grist.createReproducer"
STATUS = "grist.status"
REPRODUCER_KIND = "quickfix.grist.reproducer"
# A quick fix (clients list it with the others), told apart from the rewrites that remove the bug.
IGNORE_KIND = "quickfix.grist.ignore"
RECHECK_KIND = "source.grist.recheck"


def overlaps(a: types.Range, b: types.Range) -> bool:
    """Closed-interval overlap: a cursor at either end of a diagnostic still counts."""
    a0, a1 = (a.start.line, a.start.character), (a.end.line, a.end.character)
    b0, b1 = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return a0 <= b1 and b0 <= a1


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """LSP kind filtering: ``only=["quickfix"]`` admits ``quickfix.grist.reproducer``."""
    if not only:
        return True
    # Clients' kinds arrive as CodeActionKind members; f"{member}" is not its value on every Python.
    values = [getattr(o, "value", o) for o in only]
    return any(kind == o or kind.startswith(f"{o}.") for o in values)


def workspace_edit(
    uri: str, version: int | None, edits: list[types.TextEdit], document_changes: bool
) -> types.WorkspaceEdit:
    if document_changes:
        doc = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=doc, edits=edits)])
    return types.WorkspaceEdit(changes={uri: edits})


def fix_edits(fix: Fix, lines: list[str], encoding: str) -> list[types.TextEdit]:
    return [
        types.TextEdit(range=to_range_exact(lines, e.span, encoding), new_text=e.new_text) for e in fix.edits
    ]


def to_range_exact(lines: list[str], span: Span, encoding: str) -> types.Range:
    """Like diagnostics.to_range but an empty span stays empty (an insertion point)."""
    return types.Range(
        start=to_position(lines, span.start_line, span.start_col, encoding),
        end=to_position(lines, span.end_line, span.end_col, encoding),
    )


def _open_at_end(text: str, line: int) -> bool:
    """Whether line ``line`` ends inside a string or after a backslash: a comment cannot go there."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.start[0] > line:
                break
            if token.type == tokenize.STRING and token.start[0] <= line < token.end[0]:
                return True
    except (tokenize.TokenError, SyntaxError):
        pass
    lines = split_lines(text)
    return 0 < line <= len(lines) and lines[line - 1].rstrip().endswith("\\")


def ignore_edit(verdict: Verdict, text: str, lines: list[str], encoding: str) -> types.TextEdit:
    """Silence ``verdict``'s rule on its line: extend a `# grist: ignore[...]` there, or add one at the end.

    The comment goes on the site's first line, or its last line when the first one ends
    inside a string or a backslash continuation (both are lines a suppression counts on).
    """
    code = finding_code(verdict)
    span = verdict.site.span
    line = (
        span.end_line
        if span.end_line != span.start_line and _open_at_end(text, span.start_line)
        else span.start_line
    )
    comment = next(
        (t for t in comment_tokens(text, last_line=line) if t.start[0] == line and is_directive(t.string)),
        None,
    )
    if comment is not None:
        replaced = Span(line, comment.start[1], line, comment.end[1])
        return types.TextEdit(
            range=to_range_exact(lines, replaced, encoding), new_text=extend_comment(comment.string, [code])
        )
    end = len(lines[line - 1].rstrip()) if line <= len(lines) else 0
    stop = (
        len(lines[line - 1]) if line <= len(lines) else 0
    )  # trailing blanks are replaced, not kept before "#"
    return types.TextEdit(
        range=to_range_exact(lines, Span(line, end, line, stop), encoding),
        new_text=f"  {new_comment([code])}",
    )


def fix_title(fix: Fix) -> str:
    if fix.verified:
        return f"{fix.title} (verified by GRIST)"
    return f"{fix.title} (not verified)"


def code_actions(
    published: list[Published],
    request: types.Range,
    uri: str,
    version: int | None,
    text: str,
    encoding: str,
    *,
    only: Sequence[str] | None = None,
    document_changes: bool = True,
    propose: Callable[[Verdict], list[Fix]] | None = None,
) -> list[types.CodeAction]:
    """The actions for the diagnostics published at ``request``."""
    lines = split_lines(text)
    actions: list[types.CodeAction] = []
    for item in published:
        verdict, diagnostic = item.verdict, item.diagnostic
        if not overlaps(diagnostic.range, request):
            continue
        if verdict.status not in (Status.CONFIRMED, Status.POSSIBLE):
            continue
        fixes = list(verdict.fixes)
        if not fixes and propose is not None:
            fixes = propose(verdict)
        if wanted(types.CodeActionKind.QuickFix, only):
            # Verified fixes first: they are the ones a person should take.
            for fix in sorted(fixes, key=lambda f: not f.verified):
                actions.append(
                    types.CodeAction(
                        title=fix_title(fix),
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=fix.verified,
                        edit=workspace_edit(uri, version, fix_edits(fix, lines, encoding), document_changes),
                    )
                )
        if wanted(IGNORE_KIND, only) and verdict.site.op:
            code = finding_code(verdict)
            actions.append(
                types.CodeAction(
                    title=f"Ignore {code} on this line",
                    kind=IGNORE_KIND,
                    diagnostics=[diagnostic],
                    edit=workspace_edit(
                        uri, version, [ignore_edit(verdict, text, lines, encoding)], document_changes
                    ),
                )
            )
        if (
            verdict.status is Status.CONFIRMED
            and verdict.witness is not None
            and wanted(REPRODUCER_KIND, only)
        ):
            title = "Create reproducer test"
            actions.append(
                types.CodeAction(
                    title=title,
                    kind=REPRODUCER_KIND,
                    diagnostics=[diagnostic],
                    command=types.Command(
                        title=title, command=CREATE_REPRODUCER, arguments=[uri, verdict.site.key]
                    ),
                )
            )
    if published and wanted(RECHECK_KIND, only):
        title = "Re-check this file"
        actions.append(
            types.CodeAction(
                title=title,
                kind=RECHECK_KIND,
                command=types.Command(title=title, command=RECHECK, arguments=[uri]),
            )
        )
    return actions


# --- reproducer files --------------------------------------------------------


def reproducer_folder(document_path: str, root: str | None, directory: str) -> Path:
    """Where reproducer tests go: ``grist.reproducerDir`` (relative to the workspace folder, else
    to the file's folder when it is outside every workspace folder; ``~`` expanded)."""
    chosen = Path(directory).expanduser()
    if chosen.is_absolute():
        return chosen
    return Path(root or str(Path(document_path).parent)) / chosen


def free_name(folder: Path, filename: str, exists: Callable[[Path], bool]) -> Path:
    """``folder/filename``, or ``name_2.py``, ``name_3.py`` ... if taken: never overwrite a test."""
    candidate = folder / filename
    stem, suffix = candidate.stem, candidate.suffix
    counter = 2
    while exists(candidate):
        candidate = folder / f"{stem}_{counter}{suffix}"
        counter += 1
    return candidate


def payload_notice(names: list[str]) -> str:
    if not names:
        return ""
    listed = ", ".join(names)
    return f"# GRIST wrote the tensors this test loads beside it: {listed}\n"


def reproducer_edit(target_uri: str, source: str, resource_operations: bool) -> types.WorkspaceEdit:
    """A new file holding ``source``: CreateFile, then insert the text into it."""
    insert = types.TextEdit(
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        new_text=source,
    )
    doc = types.OptionalVersionedTextDocumentIdentifier(uri=target_uri, version=None)
    changes: list = []
    if resource_operations:
        changes.append(
            types.CreateFile(
                uri=target_uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True)
            )
        )
    changes.append(types.TextDocumentEdit(text_document=doc, edits=[insert]))
    return types.WorkspaceEdit(document_changes=changes)
