"""Notebook documents in the editor: one script per notebook, diagnostics and edits per cell.

LSP 3.17 syncs a Jupyter notebook as a notebook document whose code cells are text documents of
their own. The server checks a notebook as the CLI does (``grist_lsp/notebooks.py``): the script
of its code cells in order is the document the scheduler, the analyzer and the engine see, under
the notebook's URI and its ``.ipynb`` path. A change in one cell is a new version of that
script, so what later cells compute from it is checked again with it. This module turns the
script's diagnostics into each cell's, and the edits of a code action on the script into edits
of the cells' text documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

import attrs
from lsprotocol import types
from pygls.workspace import Workspace

from grist_lsp.model import Span
from grist_lsp.notebooks import CodeCell, Notebook, notebook_of
from grist_lsp.server.diagnostics import Published

NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)


@dataclass(frozen=True)
class OpenNotebook:
    """One version of an open notebook: its script and which cell document holds which lines."""

    uri: str
    version: int
    notebook: Notebook
    cell_uris: dict[int, str]  # cell index (as the notebook orders them) -> its text document's URI
    cell_versions: dict[str, int | None]

    def cell_of(self, cell_uri: str) -> CodeCell | None:
        index = next((i for i, uri in self.cell_uris.items() if uri == cell_uri), None)
        return next((c for c in self.notebook.cells if c.index == index), None)

    def uri_of(self, cell: CodeCell) -> str:
        return self.cell_uris[cell.index]


def read_open_notebook(workspace: Workspace, uri: str, path: str) -> OpenNotebook | None:
    """The notebook ``uri`` as the editor holds it now; None when it is not an open notebook."""
    document = workspace.get_notebook_document(notebook_uri=uri)
    if document is None:
        return None
    sources: list[str | None] = []
    cell_uris: dict[int, str] = {}
    versions: dict[str, int | None] = {}
    for index, cell in enumerate(document.cells):
        if cell.kind != types.NotebookCellKind.Code:
            sources.append(None)
            continue
        text = workspace.get_text_document(cell.document)
        sources.append(text.source)
        cell_uris[index] = cell.document
        versions[cell.document] = text.version
    return OpenNotebook(uri, document.version, notebook_of(path, sources), cell_uris, versions)


def _shifted(rng: types.Range, lines: int) -> types.Range:
    return types.Range(
        start=types.Position(line=rng.start.line + lines, character=rng.start.character),
        end=types.Position(line=rng.end.line + lines, character=rng.end.character),
    )


def cell_diagnostics(open_nb: OpenNotebook, published: list[Published]) -> dict[str, list[types.Diagnostic]]:
    """Each code cell's diagnostics (every cell present, an empty list clears it), in its own lines."""
    out: dict[str, list[types.Diagnostic]] = {uri: [] for uri in open_nb.cell_uris.values()}
    for item in published:
        diagnostic = item.diagnostic
        cell = open_nb.notebook.cell_at(diagnostic.range.start.line + 1)
        if cell is None:
            continue
        shifted = _shifted(diagnostic.range, -(cell.first_line - 1))
        if shifted.end.line >= cell.lines:  # a span past the cell's end ends with the cell
            shifted.end = types.Position(line=max(0, cell.lines - 1), character=shifted.end.character)
        related = [
            types.DiagnosticRelatedInformation(
                location=_in_cell(open_nb, r.location), message=open_nb.notebook.in_cells(r.message)
            )
            for r in diagnostic.related_information or []
        ]
        out[open_nb.uri_of(cell)].append(
            attrs.evolve(
                diagnostic,
                range=shifted,
                message=open_nb.notebook.in_cells(diagnostic.message),
                related_information=related or None,
            )
        )
    return out


def _in_cell(open_nb: OpenNotebook, location: types.Location) -> types.Location:
    """A location in the notebook's script (a witness's entry, where an input was made) as one in
    the cell holding that line; a location elsewhere as it is."""
    if unquote(location.uri) != unquote(open_nb.uri):
        return location
    cell = open_nb.notebook.cell_at(location.range.start.line + 1)
    if cell is None:
        return location
    return types.Location(uri=open_nb.uri_of(cell), range=_shifted(location.range, -(cell.first_line - 1)))


def script_range(open_nb: OpenNotebook, cell_uri: str, rng: types.Range) -> types.Range | None:
    """``rng`` of a cell document as a range of the notebook's script (None: not a code cell of it)."""
    cell = open_nb.cell_of(cell_uri)
    return None if cell is None else _shifted(rng, cell.first_line - 1)


def in_cells(open_nb: OpenNotebook, actions: list[types.CodeAction]) -> list[types.CodeAction]:
    """Code actions computed on the script with edits moved into the cells they change; an
    action whose edit touches a line that is no Python (a magic) or spans cells is dropped."""
    kept = []
    for action in actions:
        if action.edit is None:
            kept.append(action)
            continue
        edits = _script_edits(action.edit)
        moved = _cell_edits(open_nb, edits)
        if moved is None:
            continue
        changes = [
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=open_nb.cell_versions.get(uri)
                ),
                edits=cell_edits,
            )
            for uri, cell_edits in moved.items()
        ]
        action.edit = (
            types.WorkspaceEdit(document_changes=changes)
            if action.edit.document_changes is not None
            else types.WorkspaceEdit(changes=moved)
        )
        kept.append(action)
    return kept


def _script_edits(edit: types.WorkspaceEdit) -> list[types.TextEdit]:
    if edit.changes:
        return [e for edits in edit.changes.values() for e in edits]
    return [
        e
        for change in edit.document_changes or []
        if isinstance(change, types.TextDocumentEdit)
        for e in change.edits
        if isinstance(e, types.TextEdit)
    ]


def _cell_edits(open_nb: OpenNotebook, edits: list[types.TextEdit]) -> dict[str, list[types.TextEdit]] | None:
    moved: dict[str, list[types.TextEdit]] = {}
    for edit in edits:
        r = edit.range
        # Only lines decide the cell (and whether an end at column 0 is past it): columns stay as they are.
        span = Span(r.start.line + 1, r.start.character, r.end.line + 1, r.end.character)
        cell = open_nb.notebook.edit_cell(span)
        if cell is None:
            return None
        moved.setdefault(open_nb.uri_of(cell), []).append(
            types.TextEdit(range=_shifted(r, -(cell.first_line - 1)), new_text=edit.new_text)
        )
    return moved
