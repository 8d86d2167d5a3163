"""The language server on a Jupyter notebook, over stdio with pytest-lsp's client: the notebook is
opened as LSP 3.17 notebook documents (each code cell a text document of its own), diagnostics
arrive in the right cell, a quick fix is a cell edit, and an edit in cell 1 re-checks cell 3."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS
from tests.test_notebooks import SOFTMAX_CELLS, write_notebook
from tests.test_server import CONFIG, WAIT, start, status, wait_for

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def with_notebooks() -> types.ClientCapabilities:
    """VS Code's capabilities, with the notebook synchronisation VS Code announces (pytest-lsp's
    recording of them leaves it out)."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(
            dynamic_registration=True, execution_summary_support=True
        )
    )
    return capabilities


def cell_uri(path: Path, index: int) -> str:
    # VS Code's own spelling of a cell document's URI: the notebook's path, the cell in the fragment.
    return f"vscode-notebook-cell:{path.as_posix()}#W{index}sZmlsZQ%3D%3D"


def open_notebook(client: LanguageClient, path: Path, cells: list[tuple[str, str]]) -> list[str]:
    """Write the notebook, then open it as VS Code does (notebookDocument/didOpen); the cells' URIs."""
    write_notebook(path, cells)
    uris = [cell_uri(path, i) for i in range(len(cells))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=path.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(
                        kind=types.NotebookCellKind.Code if kind == "code" else types.NotebookCellKind.Markup,
                        document=uri,
                    )
                    for (kind, _), uri in zip(cells, uris)
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(
                    uri=uri, language_id="python" if kind == "code" else "markdown", version=1, text=text
                )
                for (kind, text), uri in zip(cells, uris)
            ],
        )
    )
    return uris


def apply_to(text: str, edits: list[types.TextEdit]) -> str:
    """``edits`` (LSP positions; ASCII text, so UTF-16 units are characters) applied to ``text``."""
    lines = text.split("\n")
    starts = [sum(len(line) + 1 for line in lines[:k]) for k in range(len(lines))]
    at = [
        (
            starts[e.range.start.line] + e.range.start.character,
            starts[e.range.end.line] + e.range.end.character,
            e,
        )
        for e in edits
    ]
    for lo, hi, e in sorted(at, key=lambda x: x[0], reverse=True):
        text = text[:lo] + e.new_text + text[hi:]
    return text


def change_cell(client: LanguageClient, path: Path, cell: str, text: str, version: int) -> None:
    """A new text of one cell, as VS Code sends it (notebookDocument/didChange, the notebook's version)."""
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=path.as_uri(), version=version),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=cell, version=version),
                            changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                        )
                    ]
                )
            ),
        )
    )


async def actions_at(client: LanguageClient, uri: str, d: types.Diagnostic) -> list:
    """The code actions the client gets for diagnostic ``d`` of the cell ``uri``."""
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=d.range,
            context=types.CodeActionContext(diagnostics=[d]),
        )
    )


def last_for(client: LanguageClient, uri: str) -> list[types.Diagnostic] | None:
    mine = [p for p in client.publications if p.uri == uri]
    return list(mine[-1].diagnostics) if mine else None


async def test_a_notebook_gets_its_diagnostic_in_the_cell_and_a_fix_as_a_cell_edit(
    client: LanguageClient, tmp_path: Path
) -> None:
    result = await start(client, tmp_path, {"dynamic": {"enable": False}}, with_notebooks())
    sync = result.capabilities.notebook_document_sync
    assert sync is not None and sync.notebook_selector[0].notebook == "jupyter-notebook"  # type: ignore[union-attr]

    path = tmp_path / "probs.ipynb"
    uris = open_notebook(client, path, SOFTMAX_CELLS)
    await wait_for(client, lambda: bool(last_for(client, uris[2])), "diagnostics in cell 3")
    [d] = last_for(client, uris[2]) or []
    assert d.code == KINDS["log"].code
    # Cell 3's second line, where `torch.log(probs)` starts: lines count from the cell, not the script.
    assert (d.range.start.line, d.range.start.character) == (1, 12)
    assert last_for(client, uris[0]) == []  # cell 1 has nothing

    actions = await actions_at(client, uris[2], d)
    fixes = [a for a in actions if a.kind == types.CodeActionKind.QuickFix and a.edit is not None]
    assert fixes, [a.title for a in actions]
    changes = fixes[0].edit.document_changes  # type: ignore[union-attr]
    assert changes is not None
    [edit] = changes
    assert isinstance(edit, types.TextDocumentEdit) and edit.text_document.uri == uris[2]
    assert all(e.range.start.line == 1 for e in edit.edits)  # type: ignore[union-attr]

    # The editor applies the edit to cell 3's text and sends the cell's new text: the squiggle goes.
    fixed = apply_to(SOFTMAX_CELLS[2][1], [e for e in edit.edits if isinstance(e, types.TextEdit)])
    assert fixed != SOFTMAX_CELLS[2][1]
    change_cell(client, path, uris[2], fixed, version=2)
    await wait_for(client, lambda: last_for(client, uris[2]) == [], "cell 3 cleared by its quick fix")
    assert (await status(client))["open_documents"] == 1

    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=path.as_uri()),
            cell_text_documents=[types.TextDocumentIdentifier(uri=u) for u in uris],
        )
    )
    await wait_for(client, lambda: (lambda s: s is not None)(last_for(client, uris[0])), "closed")


async def test_an_edit_in_cell_1_rechecks_what_cell_3_computes_from_it(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}}, with_notebooks())
    cells = [
        ("code", "import torch\nx = torch.randn(8)"),
        ("markdown", "roots"),
        ("code", "y = torch.sqrt(x)"),
    ]
    path = tmp_path / "roots.ipynb"
    uris = open_notebook(client, path, cells)
    await wait_for(client, lambda: bool(last_for(client, uris[2])), "the sqrt in cell 3")
    assert [d.code for d in last_for(client, uris[2]) or []] == [KINDS["sqrt"].code]

    change_cell(client, path, uris[0], "import torch\nx = torch.rand(8) + 0.5", version=2)
    # torch.rand(8) + 0.5 is in [0.5, 1.5): cell 3's square root is now proved safe, and its squiggle goes.
    await wait_for(client, lambda: last_for(client, uris[2]) == [], "cell 3 cleared by the edit in cell 1")


async def test_a_notebook_finding_is_confirmed_in_its_cell_by_the_engine(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 5}, with_notebooks())
    path = tmp_path / "probs.ipynb"
    uris = open_notebook(client, path, SOFTMAX_CELLS)

    def confirmed() -> bool:
        return any(
            d.severity == types.DiagnosticSeverity.Error and d.code == KINDS["log"].code
            for d in last_for(client, uris[2]) or []
        )

    await wait_for(client, confirmed, "the confirmed log in cell 3")
    [d] = last_for(client, uris[2]) or []
    assert d.range.start.line == 1
    # The failing input was made in cell 1 (`logits = torch.randn(...)`, its third line): the
    # related location is that cell's document and line, not a line of the .ipynb file.
    made = [r.location for r in d.related_information or [] if "failing input" in r.message]
    assert [(loc.uri, loc.range.start.line) for loc in made] == [(uris[0], 2)], d.related_information
    actions: list = []

    async def ask() -> None:
        actions[:] = await actions_at(client, uris[2], d)

    # The engine re-checks the fix after the confirmation: the verified fix comes a moment later.
    deadline = asyncio.get_running_loop().time() + WAIT
    await ask()
    while not any(a.is_preferred for a in actions) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        await ask()
    titles = [a.title for a in actions]
    assert "Create reproducer test" in titles
    [preferred] = [a for a in actions if a.is_preferred]
    assert preferred.title.startswith("Clamp the operand of torch.log") and preferred.edit is not None

    # "Create reproducer test" from the cell: a pytest file named after the cell, made by the editor.
    [repro] = [a for a in actions if a.command is not None and a.command.command == "grist.createReproducer"]
    assert repro.command is not None
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command=repro.command.command, arguments=list(repro.command.arguments or [])
        )
    )
    assert result["uri"].endswith("/test_grist_probs_cell3_2_log.py")
    [applied] = client.applied_edits  # type: ignore[attr-defined]
    create, fill = applied.edit.document_changes
    assert isinstance(create, types.CreateFile) and "probs.ipynb:cell 3:2:13" in fill.edits[0].new_text


async def test_a_cell_that_is_not_python_is_said_in_that_cell_and_the_others_are_checked(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}}, with_notebooks())
    cells = [
        ("code", "%matplotlib inline\nimport torch\nx = torch.randn(8)"),
        ("code", "def broken(:\n    return 1"),
        ("code", "y = torch.sqrt(x)"),
    ]
    path = tmp_path / "lab.ipynb"
    uris = open_notebook(client, path, cells)
    await wait_for(client, lambda: bool(last_for(client, uris[2])), "the sqrt in cell 3")
    [bad] = last_for(client, uris[1]) or []
    assert bad.code == ERROR_CODE and bad.message.startswith("cell 2: syntax error")
    assert bad.range.start.line == 0
    assert [d.code for d in last_for(client, uris[2]) or []] == [KINDS["sqrt"].code]
    assert last_for(client, uris[0]) == []  # the magic line is no finding
