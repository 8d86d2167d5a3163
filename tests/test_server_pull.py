"""Pull diagnostics, the run's log line and the reproducer folder, over stdio with pytest-lsp.

A client that declares ``textDocument.diagnostic`` pulls (``textDocument/diagnostic``) and is
told to pull again (``workspace/diagnostic/refresh``) when the engine confirms a bug; one that
does not is pushed ``textDocument/publishDiagnostics``, never both.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from grist_lsp.analyzer.catalogue import KINDS
from tests.test_server import CONFIG, SCRIPT, open_file, start, wait_for

LOG = KINDS["log"].code


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def pulling_capabilities() -> types.ClientCapabilities:
    """VS Code's recorded capabilities plus the pull model, as VS Code >= 1.74 declares it."""
    caps = client_capabilities("visual-studio-code")
    caps.text_document.diagnostic = types.DiagnosticClientCapabilities(
        dynamic_registration=True, related_document_support=False
    )
    caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps


async def pull(client: LanguageClient, uri: str, previous: str | None = None) -> Any:
    return await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=previous
        )
    )


def confirmed(items: list[types.Diagnostic]) -> list[types.Diagnostic]:
    return [d for d in items if d.code == LOG and d.severity == types.DiagnosticSeverity.Error]


@pytest.mark.asyncio
async def test_a_pulling_client_pulls_and_is_told_to_pull_again_when_a_bug_is_confirmed(
    client: LanguageClient, tmp_path: Path
) -> None:
    result = await start(client, tmp_path, {"budget": 1}, capabilities=pulling_capabilities())
    assert result.capabilities.diagnostic_provider is not None
    uri = open_file(client, tmp_path / "train.py", SCRIPT)

    first = await pull(client, uri)  # waits for the static pass: never an empty first answer
    assert isinstance(first, types.RelatedFullDocumentDiagnosticReport) and first.result_id
    assert [d.code for d in first.items if d.code == LOG] == [LOG]

    await wait_for(
        client,
        lambda: client.diagnostic_refresh_count > 0,
        "workspace/diagnostic/refresh after the engine run",
    )
    report = await pull(client, uri, first.result_id)
    while not confirmed(
        getattr(report, "items", None) or []
    ):  # fixes may still be re-checked: pull until confirmed
        await wait_for(
            client,
            lambda n=client.diagnostic_refresh_count: client.diagnostic_refresh_count > n,
            "another refresh",
        )
        report = await pull(client, uri, report.result_id)
    assert "torch.log receives" in confirmed(report.items)[0].message

    again = await pull(client, uri, report.result_id)
    if isinstance(again, types.RelatedFullDocumentDiagnosticReport):  # the verified fixes landed meanwhile
        again = await pull(client, uri, again.result_id)
    assert isinstance(again, types.RelatedUnchangedDocumentDiagnosticReport)
    assert client.publications == []  # pulled, never pushed

    # one line per engine run in the output, at the default (info) level
    lines = [m.message for m in client.log_messages if m.message.startswith("checked ")]
    assert (
        len(lines) == 1
        and lines[0].endswith(" s")
        and lines[0].startswith("checked train.py: 1 site, 1 confirmed, ")
    ), lines
    assert (
        client.log_messages[[m.message for m in client.log_messages].index(lines[0])].type
        == types.MessageType.Info
    )


@pytest.mark.asyncio
async def test_a_client_without_pull_support_is_pushed_confirmed_bugs(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 1})  # VS Code's recorded capabilities declare no pull
    uri = open_file(client, tmp_path / "train.py", SCRIPT)
    await wait_for(
        client,
        lambda: any(p.uri == uri and confirmed(p.diagnostics) for p in client.publications),
        "a pushed confirmed bug",
    )
    assert client.diagnostic_refresh_count == 0


@pytest.mark.asyncio
async def test_reproducer_goes_to_the_chosen_folder_and_fails_on_the_bug(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 1, "reproducerDir": "checks/nan"})
    uri = open_file(client, tmp_path / "train.py", SCRIPT)
    await wait_for(
        client,
        lambda: any(p.uri == uri and confirmed(p.diagnostics) for p in client.publications),
        "a confirmed bug",
    )
    d = confirmed(
        next(
            p for p in reversed(client.publications) if p.uri == uri and confirmed(p.diagnostics)
        ).diagnostics
    )[0]
    assert "cache" not in d.message and ".pt" not in d.message  # no internal path in what the user reads
    assert all(".pt" not in r.message for r in d.related_information or [])
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="grist.createReproducer", arguments=[uri, d.data["key"]])
    )
    created = Path(result["uri"].removeprefix("file://"))
    assert created.parent == tmp_path / "checks" / "nan"
    assert not list(tmp_path.glob("*.pt"))  # payloads (if any) go beside the test, not in the workspace root
    message = [m.message for m in client.messages if "created" in m.message]
    assert message and "checks/nan/" in message[0] and "pip install pytest" in message[0]
    # the editor applied the edit in a real session; here we write what it would have written
    (applied,) = client.applied_edits
    created.parent.mkdir(parents=True, exist_ok=True)  # VS Code's CreateFile makes the folders
    created.write_text(applied.edit.document_changes[1].edits[0].new_text, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(created)],
        capture_output=True,
        text=True,
        cwd=str(created.parent),
        timeout=600,
    )
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout


def test_a_cancel_for_an_answered_request_is_not_a_warning_in_the_editor_output(tmp_path: Path) -> None:
    """Editors cancel requests the server has already answered; pygls would warn on stderr
    (which VS Code shows in the output channel) every time."""
    import json

    def frame(message: dict) -> bytes:
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}},
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}},  # answered already
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "grist_lsp.server.server"],
        input=b"".join(map(frame, messages)),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert b'"id": 2' in proc.stdout.replace(b'"id":2', b'"id": 2')  # the shutdown was answered
    assert b"Cancel notification" not in proc.stderr, proc.stderr
