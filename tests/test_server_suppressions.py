"""The language server honours the project's suppressions and baseline, and offers "Ignore GRIST### on this line".

Real server processes over stdio, driven by pytest-lsp as in test_server.py (whose
session helpers are reused); the engine is off, since what is tested is which
diagnostics are shown and the edit the action makes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.test_server import CONFIG, code_actions_at, open_file, published_for, start, wait_for

pytestmark = pytest.mark.asyncio

STATIC_ONLY = {"dynamic": {"enable": False}}

SOURCE = """import torch


def f(x, y):
    a = torch.log(x)  # grist: ignore[GRIST101] -- x is a probability, never 0
    b = torch.log(y)
    return a, b
"""


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def _diagnostics(client: LanguageClient, uri: str, version: int = 1) -> list[types.Diagnostic]:
    await wait_for(client, lambda: published_for(client, uri, version) is not None, f"diagnostics for {uri}")
    return published_for(client, uri, version) or []


def _apply(text: str, edit: types.TextEdit) -> str:
    lines = text.split("\n")
    start, end = edit.range.start, edit.range.end
    assert start.line == end.line
    line = lines[start.line]
    lines[start.line] = line[: start.character] + edit.new_text + line[end.character :]
    return "\n".join(lines)


async def test_a_suppressed_site_is_not_shown_and_its_neighbour_is(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, STATIC_ONLY)
    uri = open_file(client, tmp_path / "m.py", SOURCE)
    shown = await _diagnostics(client, uri)
    assert [(d.code, d.range.start.line) for d in shown] == [("GRIST101", 5)]


async def test_ignore_action_adds_the_comment_that_silences_the_site(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, STATIC_ONLY)
    uri = open_file(client, tmp_path / "m.py", SOURCE)
    (diagnostic,) = await _diagnostics(client, uri)

    actions = await code_actions_at(client, uri, diagnostic)
    (ignore,) = [a for a in actions if a.title == "Ignore GRIST101 on this line"]
    assert ignore.kind == "quickfix.grist.ignore" and ignore.kind.startswith(types.CodeActionKind.QuickFix)
    (change,) = ignore.edit.document_changes
    (edit,) = change.edits
    fixed = _apply(SOURCE, edit)
    assert fixed.split("\n")[5] == "    b = torch.log(y)  # grist: ignore[GRIST101]"

    # The edited text shows nothing more.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    assert await _diagnostics(client, uri, 2) == []


async def test_ignore_action_extends_an_existing_comment(client: LanguageClient, tmp_path: Path) -> None:
    source = (
        "import torch\n\n\ndef f(x, y):\n    return torch.log(x) / y  # grist: ignore[GRIST105] -- y > 0\n"
    )
    await start(client, tmp_path, STATIC_ONLY)
    uri = open_file(client, tmp_path / "m.py", source)
    (diagnostic,) = await _diagnostics(client, uri)
    actions = await code_actions_at(client, uri, diagnostic)
    (ignore,) = [a for a in actions if a.title == "Ignore GRIST101 on this line"]
    (edit,) = ignore.edit.document_changes[0].edits
    assert (
        _apply(source, edit).split("\n")[4]
        == "    return torch.log(x) / y  # grist: ignore[GRIST101, GRIST105] -- y > 0"
    )


async def test_server_honours_per_file_ignores_and_the_baseline(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.grist]\nbaseline = "grist-baseline.json"\nper-file-ignores = {"scripts/*" = ["GRIST105"]}\n',
        encoding="utf-8",
    )
    old = "import torch\n\n\ndef f(x):\n    return torch.log(x)\n"
    (tmp_path / "m.py").write_text(old, encoding="utf-8")
    written = subprocess.run(
        [
            sys.executable,
            "-m",
            "grist_lsp",
            "--check",
            "m.py",
            "--static-only",
            "--write-baseline",
            "grist-baseline.json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert written.returncode == 0, written.stderr

    await start(client, tmp_path, STATIC_ONLY)
    # The baselined log moved down two lines and a new division came with it.
    new = "import torch\n\n\ndef g(a: torch.Tensor, b):\n    return a / b\n\n\ndef f(x):\n    return torch.log(x)\n"
    uri = open_file(client, tmp_path / "m.py", new)
    assert [(d.code, d.range.start.line) for d in await _diagnostics(client, uri)] == [("GRIST105", 4)]
    (tmp_path / "scripts").mkdir()
    script = open_file(
        client,
        tmp_path / "scripts" / "run.py",
        "import torch\n\n\ndef g(a: torch.Tensor, b):\n    return a / b\n",
    )
    assert await _diagnostics(client, script) == []


async def test_ignore_comment_goes_where_a_comment_can_stand() -> None:
    """A site whose first line ends inside a string gets the comment on its last line (both lines count)."""
    from grist_lsp.analyzer.analysis import analyze_source
    from grist_lsp.server.actions import ignore_edit
    from grist_lsp.server.diagnostics import split_lines
    from grist_lsp.suppressions import RuleSelection, silence

    source = 'import torch\n\n\ndef f(x):\n    return torch.log(x + len("""a\nb"""))\n'
    (verdict,) = [v for v in analyze_source("/w/m.py", source) if v.site.kind == "log"]
    assert (verdict.site.span.start_line, verdict.site.span.end_line) == (5, 6)
    edit = ignore_edit(verdict, source, split_lines(source), "utf-16")
    assert edit.range.start.line == 5  # 0-based: the site's last line
    fixed = _apply(source, edit)
    assert fixed.split("\n")[5] == 'b"""))  # grist: ignore[GRIST101]'
    assert silence([verdict], fixed, "m.py", RuleSelection()).kept == []
