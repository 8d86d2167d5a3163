"""The language server over stdio, driven by pytest-lsp with VS Code's recorded capabilities.

Each test starts a real server process (``python -m grist_lsp.server.server``),
initializes it the way VS Code does, and checks what an editor would show:
diagnostic ranges (in UTF-16 units), codes, severities, code actions, the edits
commands send back, and work-done progress around engine runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS
from grist_lsp.analyzer.fixes import propose_fixes

pytestmark = pytest.mark.asyncio

WAIT = 60.0  # seconds before a wait gives up: a failure guard, not a speed assertion

BUGGY = """import torch


def loss(logits):
    p = torch.softmax(logits, dim=-1)
    return -torch.log(p).sum()
"""

# The emoji is one code point but two UTF-16 code units; "é" is one of each.
UNICODE = """import torch


def f(x):
    s = "é😀"; y = torch.log(x)
    return y
"""


def _record_publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.publications.append(params)  # type: ignore[attr-defined]


def _record_apply_edit(
    client: LanguageClient, params: types.ApplyWorkspaceEditParams
) -> types.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)  # type: ignore[attr-defined]
    return types.ApplyWorkspaceEditResult(applied=True)


def _record_registration(client: LanguageClient, params: types.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)  # type: ignore[attr-defined]


def converter():
    """lsprotocol reads any ``{"command": ...}`` as a Command; VS Code (like the spec) tells a
    CodeAction by its ``command`` being an object. Do the same so actions keep their kind."""
    conv = default_converter()

    def action_or_command(obj: dict, _: Any) -> types.Command | types.CodeAction:
        if isinstance(obj.get("command"), str):
            return conv.structure(obj, types.Command)
        return conv.structure(obj, types.CodeAction)

    conv.register_structure_hook(types.Command | types.CodeAction, action_or_command)
    return conv


def make_client() -> LanguageClient:
    """pytest-lsp's client, also recording every publication (with its version) and applyEdit."""
    client = LanguageClient(converter_factory=converter)
    client.publications = []  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    register_lsp_features(
        client,
        {
            **DEFAULT_CLIENT_FEATURES,
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _record_publish,
            types.WORKSPACE_APPLY_EDIT: _record_apply_edit,
            types.CLIENT_REGISTER_CAPABILITY: _record_registration,
        },
    )
    return client


CONFIG = ClientServerConfig(
    server_command=[sys.executable, "-m", "grist_lsp.server.server"],
    client_factory=make_client,
)


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def start(
    client: LanguageClient,
    root: Path,
    options: dict[str, Any] | None = None,
    capabilities: types.ClientCapabilities | None = None,
) -> types.InitializeResult:
    return await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities or client_capabilities("visual-studio-code"),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )


def open_file(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )
    return uri


def replace_text(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def wait_for(client: LanguageClient, check: Callable[[], bool], what: str) -> None:
    """Wait until ``check`` holds on what the client has received (any notification kind)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not check():
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}; last publications: {client.publications[-3:]}"
            )
        await asyncio.sleep(0.05)


def published_for(client: LanguageClient, uri: str, version: int) -> list[types.Diagnostic] | None:
    """The diagnostics last published for ``uri`` if they were published for ``version``."""
    mine = [p for p in client.publications if p.uri == uri]
    if not mine or mine[-1].version != version:
        return None
    return list(mine[-1].diagnostics)


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def position_of(text: str, needle: str) -> types.Position:
    """The LSP (UTF-16) position where ``needle`` starts in ``text``."""
    for row, line in enumerate(text.split("\n")):
        col = line.find(needle)
        if col >= 0:
            return types.Position(line=row, character=utf16(line[:col]))
    raise AssertionError(f"{needle!r} not in text")


async def status(client: LanguageClient) -> dict[str, Any]:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="grist.status"))


# --- static diagnostics --------------------------------------------------------


async def test_open_publishes_static_warning_at_the_op(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    uri = open_file(client, tmp_path / "model.py", BUGGY)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics for version 1")

    diagnostics = published_for(client, uri, 1)
    logs = [d for d in diagnostics if d.code == KINDS["log"].code]
    assert len(logs) == 1, diagnostics
    d = logs[0]
    assert d.range.start == position_of(BUGGY, "torch.log(p)")
    assert d.range.end.line == d.range.start.line and d.range.end.character > d.range.start.character
    assert d.severity == types.DiagnosticSeverity.Warning
    assert d.source == "grist"
    assert d.code_description.href.endswith("README.md#rule-codes")
    assert "log" in d.message
    assert d.data["status"] == "possible" and d.data["verdict"]["site"]["kind"] == "log"


async def test_columns_are_utf16_code_units(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    uri = open_file(client, tmp_path / "uni.py", UNICODE)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics")

    (d,) = [d for d in published_for(client, uri, 1) if d.code == KINDS["log"].code]
    line = UNICODE.split("\n")[4]
    code_points = line.index("torch.log")
    assert d.range.start == types.Position(line=4, character=code_points + 1)  # the emoji counts twice
    assert d.range.start == position_of(UNICODE, "torch.log(x)")


async def test_negotiated_utf32_columns_are_code_points(client: LanguageClient, tmp_path: Path) -> None:
    capabilities = client_capabilities("visual-studio-code")
    capabilities.general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf32, types.PositionEncodingKind.Utf16]
    )
    result = await start(client, tmp_path, {"dynamic": {"enable": False}}, capabilities)
    assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf32
    uri = open_file(client, tmp_path / "uni.py", UNICODE)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics")

    (d,) = [d for d in published_for(client, uri, 1) if d.code == KINDS["log"].code]
    assert d.range.start == types.Position(line=4, character=UNICODE.split("\n")[4].index("torch.log"))


async def test_change_updates_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    uri = open_file(client, tmp_path / "model.py", BUGGY)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "first diagnostics")

    fixed = BUGGY.replace("-torch.log(p).sum()", "(-torch.sqrt(p).sum())")
    replace_text(client, uri, fixed, version=2)
    await wait_for(client, lambda: published_for(client, uri, 2) is not None, "diagnostics for version 2")

    codes = {d.code for d in published_for(client, uri, 2)}
    assert KINDS["log"].code not in codes
    # sqrt of a softmax output is in range: either proved safe (hidden) or still reported as sqrt.
    assert codes <= {KINDS["sqrt"].code}


async def test_hundred_rapid_edits_end_with_the_last_texts_diagnostics(
    client: LanguageClient, tmp_path: Path
) -> None:
    # The engine is on: edits keep cancelling and re-debouncing it while the static pass keeps up.
    await start(client, tmp_path, {"budget": 1})
    uri = open_file(client, tmp_path / "model.py", "import torch\n")
    lines = ["import torch", "", "", "def f(x):"]
    for version in range(2, 102):
        # Each edit adds one more unsafe op; only the last text's sites may remain.
        lines.append(
            f"    y{version} = torch.log(x + {version})" if version % 2 else f"    y{version} = x / {version}"
        )
        replace_text(client, uri, "\n".join(lines) + "\n", version)
    final_text = "\n".join(lines) + "\n"
    await wait_for(client, lambda: published_for(client, uri, 101) is not None, "diagnostics for version 101")

    final = published_for(client, uri, 101)
    # Versions only grow: nothing older was published after the newest one.
    versions = [p.version for p in client.publications if p.uri == uri]
    assert versions == sorted(versions)
    rows = {d.range.start.line for d in final}
    log_rows = {row for row, line in enumerate(final_text.split("\n")) if "torch.log(" in line}
    assert log_rows <= rows  # every log(x + k) of the final text is reported on its own line
    assert len(lines) - 1 in rows  # including the one the very last edit added
    op_rows = {
        row for row, line in enumerate(final_text.split("\n")) if "torch.log(" in line or " / " in line
    }
    assert rows <= op_rows  # and nothing points at a line of an older text
    assert (await status(client))["open_documents"] == 1  # the server still answers


async def test_syntax_error_gives_error_diagnostic_and_server_keeps_answering(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    broken = "import torch\n\ndef f(x:\n    return torch.log(x)\n"
    uri = open_file(client, tmp_path / "broken.py", broken)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics")

    (d,) = published_for(client, uri, 1)
    assert d.code == ERROR_CODE
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.range.start.line in (2, 3)  # the parser's line: the open parenthesis or the line after it

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=d.range,
            context=types.CodeActionContext(diagnostics=[d]),
        )
    )
    assert [a.title for a in actions] == ["Re-check this file"]  # no fix for a file that does not parse

    replace_text(client, uri, BUGGY, version=2)
    await wait_for(client, lambda: published_for(client, uri, 2) is not None, "diagnostics after the fix")
    assert [d.code for d in published_for(client, uri, 2)] == [KINDS["log"].code]


async def test_settings_hide_possible_and_disable(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}, "showPossible": False})
    uri = open_file(client, tmp_path / "model.py", BUGGY)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics")
    assert published_for(client, uri, 1) == []

    # Settings that arrive later (didChangeConfiguration) re-publish the same text.
    count = len(client.publications)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"grist": {"showPossible": True, "dynamic": {"enable": False}}}
        )
    )
    await wait_for(
        client,
        lambda: len(client.publications) > count and bool(client.publications[-1].diagnostics),
        "re-publication",
    )
    assert [d.code for d in client.publications[-1].diagnostics] == [KINDS["log"].code]


# --- trust ---------------------------------------------------------------------


async def test_untrusted_workspace_never_runs_code(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"workspaceTrusted": False, "budget": 2})
    uri = open_file(client, tmp_path / "model.py", BUGGY + "\nloss(torch.tensor([[103.0, 0.0]]))\n")
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="grist.recheck", arguments=[uri])
    )
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "static diagnostics")

    state = await status(client)
    assert state["trusted"] is False and state["dynamic_allowed"] is False
    assert state["engine_runs"] == 0
    assert client.progress_reports == {}
    (d,) = [d for d in published_for(client, uri, 1) if d.code == KINDS["log"].code]
    assert d.severity == types.DiagnosticSeverity.Warning


async def test_pulled_configuration_applies_before_any_code_runs(
    client: LanguageClient, tmp_path: Path
) -> None:
    # initializationOptions allow running code; the workspace/configuration answer forbids it.
    client.set_configuration({"grist": {"dynamic": {"enable": False}, "showSafe": True}})
    await start(client, tmp_path, {"budget": 2})
    uri = open_file(client, tmp_path / "train.py", SCRIPT)  # at once: before the answer may have arrived
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "static diagnostics")
    state = await status(client)
    for _ in range(int(WAIT / 0.05)):
        if state["config_ready"]:
            break
        await asyncio.sleep(0.05)
        state = await status(client)
    assert state["settings"]["dynamic_enable"] is False and state["settings"]["show_safe"] is True
    assert state["engine_runs"] == 0 and client.progress_reports == {}
    (d,) = [d for d in published_for(client, uri, 1) if d.code == KINDS["log"].code]
    assert d.severity == types.DiagnosticSeverity.Warning


# --- code actions and commands ---------------------------------------------------


async def code_actions_at(client: LanguageClient, uri: str, diagnostic: types.Diagnostic) -> list[Any]:
    return list(
        await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic]),
            )
        )
        or []
    )


async def test_code_actions_offer_fix_and_recheck(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    uri = open_file(client, tmp_path / "model.py", BUGGY)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics")
    (d,) = [d for d in published_for(client, uri, 1) if d.code == KINDS["log"].code]

    actions = await code_actions_at(client, uri, d)
    fixes = [a for a in actions if a.kind == types.CodeActionKind.QuickFix]
    assert fixes, actions
    fix = fixes[0]
    # Static-only: the rewrite is offered but not verified, so it is not the preferred action.
    assert not fix.is_preferred and "not verified" in fix.title
    (change,) = fix.edit.document_changes
    assert change.text_document.uri == uri and change.text_document.version == 1
    (edit,) = change.edits
    assert edit.range.start == d.range.start
    # The offered edit is the analyzer's first proposal for this site (log_softmax or a clamp).
    (verdict,) = [v for v in analyze_source(str(tmp_path / "model.py"), BUGGY) if v.site.kind == "log"]
    first = propose_fixes(BUGGY, verdict)[0]
    assert edit.new_text == first.edits[0].new_text != "torch.log(p)"

    recheck = [a for a in actions if a.command is not None and a.command.command == "grist.recheck"]
    assert [a.title for a in recheck] == ["Re-check this file"]
    assert list(recheck[0].command.arguments) == [uri]
    assert not [a for a in actions if a.command is not None and a.command.command == "grist.createReproducer"]


async def test_recheck_command_republishes_current_text(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    uri = open_file(client, tmp_path / "model.py", BUGGY)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "diagnostics")
    count = len(client.publications)

    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="grist.recheck", arguments=[uri])
    )
    await wait_for(client, lambda: len(client.publications) > count, "re-publication after grist.recheck")
    assert client.publications[-1].version == 1
    assert [d.code for d in client.publications[-1].diagnostics] == [KINDS["log"].code]


# --- dynamic confirmation (runs the program in the engine's worker processes) -----

SCRIPT = (
    BUGGY
    + """

if __name__ == "__main__":
    print(loss(torch.randn(2, 3)))
"""
)


def diagnostics_with(
    client: LanguageClient, uri: str, version: int, code: str, severity: types.DiagnosticSeverity
) -> list[types.Diagnostic]:
    return [
        d for d in (published_for(client, uri, version) or []) if d.code == code and d.severity == severity
    ]


def verified_fixes(d: types.Diagnostic) -> list[dict]:
    return [f for f in d.data["verdict"]["fixes"] if f["verified"]]


async def test_unsaved_buggy_buffer_is_confirmed_with_progress_fix_and_reproducer(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "tests").mkdir()
    await start(client, tmp_path, {"budget": 1})
    path = tmp_path / "train.py"
    uri = open_file(client, path, SCRIPT)
    path.write_text("import torch\n", encoding="utf-8")  # the buggy text exists only in the editor
    log = KINDS["log"].code

    await wait_for(
        client,
        lambda: bool(diagnostics_with(client, uri, 1, log, types.DiagnosticSeverity.Error)),
        "a confirmed error",
    )
    (d,) = diagnostics_with(client, uri, 1, log, types.DiagnosticSeverity.Error)
    assert d.range.start == position_of(SCRIPT, "torch.log(p)")
    assert d.message.startswith("logarithm of a non-positive value: torch.log receives")
    assert "-inf" in d.message
    assert d.data["status"] == "confirmed" and d.data["verdict"]["witness"]["replayed"] is True
    assert any(
        r.location.uri == uri
        and r.location.range.start.line == SCRIPT.split("\n").index("    print(loss(torch.randn(2, 3)))")
        for r in d.related_information or []
    )  # the failing input's creation site

    # Verified fixes arrive in a second publication, after each was re-checked by the engine.
    await wait_for(
        client,
        lambda: any(
            verified_fixes(x) for x in diagnostics_with(client, uri, 1, log, types.DiagnosticSeverity.Error)
        ),
        "a verified fix",
    )
    (d,) = diagnostics_with(client, uri, 1, log, types.DiagnosticSeverity.Error)

    # Work-done progress of the one run: begun, reported, ended once the fixes were re-checked.
    (reports,) = [r for r in client.progress_reports.values() if r]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].title.startswith("GRIST")
    assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    await client.workspace_execute_command_async(types.ExecuteCommandParams(command="grist.status"))
    assert isinstance(reports[-1], types.WorkDoneProgressEnd) and reports[-1].message == "done"

    actions = await code_actions_at(client, uri, d)
    preferred = [a for a in actions if a.is_preferred]
    assert (
        preferred
        and preferred[0].kind == types.CodeActionKind.QuickFix
        and "verified by GRIST" in preferred[0].title
    )
    (edit,) = preferred[0].edit.document_changes[0].edits
    assert edit.range.start == d.range.start
    assert edit.new_text == verified_fixes(d)[0]["edits"][0]["new_text"]
    assert "log_softmax" in edit.new_text or "clamp" in edit.new_text

    (repro,) = [a for a in actions if a.command is not None and a.command.command == "grist.createReproducer"]
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=repro.command.command, arguments=list(repro.command.arguments))
    )
    (applied,) = client.applied_edits
    create, fill = applied.edit.document_changes
    assert isinstance(create, types.CreateFile) and create.uri == result["uri"]
    assert create.uri.startswith((tmp_path / "tests").as_uri())
    assert "def test_" in fill.edits[0].new_text and fill.text_document.uri == create.uri
    assert [s.uri for s in client.shown_documents] == [create.uri]

    # An edit elsewhere: the confirmation follows its line (marked) while the engine re-checks.
    edited = "# a comment\n" + SCRIPT
    replace_text(client, uri, edited, version=2)
    await wait_for(client, lambda: published_for(client, uri, 2) is not None, "diagnostics for version 2")
    (carried,) = [d for d in published_for(client, uri, 2) if d.code == log]
    assert carried.severity == types.DiagnosticSeverity.Error and "re-checking" in carried.message
    assert carried.range.start == position_of(edited, "torch.log(p)")


async def test_crashing_program_gives_error_and_server_keeps_answering(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 2})
    crash = "import ctypes\nimport torch\n\nx = torch.randn(3)\nctypes.string_at(0)\ny = torch.log(x)\n"
    uri = open_file(client, tmp_path / "crash.py", crash)
    await wait_for(
        client,
        lambda: any(d.code == ERROR_CODE for d in published_for(client, uri, 1) or []),
        "an error verdict",
    )
    (err,) = [d for d in published_for(client, uri, 1) if d.code == ERROR_CODE]
    assert err.severity == types.DiagnosticSeverity.Error
    assert (await status(client))["engine_runs"] == 1

    # The same text again (an edit and its undo, then a save) is answered from the cache.
    replace_text(client, uri, crash + "# typing\n", version=2)
    replace_text(client, uri, crash, version=3)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await wait_for(
        client,
        lambda: any(d.code == ERROR_CODE for d in published_for(client, uri, 3) or []),
        "the cached error",
    )
    assert (await status(client))["engine_runs"] == 1


async def test_edits_during_a_run_cancel_it_and_the_last_text_wins(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 3, "dynamic": {"enable": True, "debounce": 0.3}})
    # The program sleeps before it reaches the op: the run is surely still going when we type.
    slow = "import time\n" + SCRIPT.replace("    print(loss(", "    time.sleep(600)\n    print(loss(")
    uri = open_file(client, tmp_path / "train.py", slow)
    await wait_for(client, lambda: any(client.progress_reports.values()), "progress of the first run")
    safe = slow.replace("-torch.log(p).sum()", "-torch.log(p.clamp_min(1e-8)).sum()")
    for version in range(2, 22):
        replace_text(client, uri, safe if version % 2 else slow + f"\n# edit {version}\n", version)
    await wait_for(
        client, lambda: published_for(client, uri, 21) is not None, "diagnostics for the last version"
    )
    final = published_for(client, uri, 21)
    assert not [d for d in final if d.code == KINDS["log"].code]  # the last text clamps the operand
    versions = [p.version for p in client.publications if p.uri == uri]
    assert versions == sorted(versions)
    # The first run was stopped (its workers killed), not left to finish.
    await wait_for(
        client,
        lambda: all(
            r and isinstance(r[-1], types.WorkDoneProgressEnd) for r in client.progress_reports.values()
        ),
        "progress to end",
    )
    first = next(r for r in client.progress_reports.values() if r)
    assert first[-1].message == "cancelled"
    # Nothing is left running: the clamped last text is proved safe statically and needs no run.
    await wait_for(
        client,
        lambda: all(
            isinstance(r[-1], types.WorkDoneProgressEnd) for r in client.progress_reports.values() if r
        ),
        "all runs to end",
    )
    assert (await status(client))["running"] == []


def descendants(pid: int) -> list[int]:
    """Processes started (transitively) by ``pid``, from /proc."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for child in children:
            out.append(child)
            out.extend(descendants(child))
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


async def test_worker_killed_from_outside_gives_error_and_server_keeps_answering(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 3})
    slow = "import time\nimport torch\n\nx = torch.randn(3)\ntime.sleep(600)\ny = torch.log(x)\n"
    uri = open_file(client, tmp_path / "slow.py", slow)
    await wait_for(client, lambda: any(client.progress_reports.values()), "the run to begin")

    server_pid = client._server.pid  # the server process this test started
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    workers: list[int] = []
    while not workers and loop.time() < deadline:
        workers = [p for p in descendants(server_pid) if "grist_lsp.dynamic" in cmdline(p)]
        await asyncio.sleep(0.1)
    assert workers, "no engine worker process appeared"
    for pid in workers:
        os.kill(pid, signal.SIGKILL)

    await wait_for(
        client,
        lambda: any(d.code == ERROR_CODE for d in published_for(client, uri, 1) or []),
        "an error verdict",
    )
    (err,) = [d for d in published_for(client, uri, 1) if d.code == ERROR_CODE]
    assert err.severity == types.DiagnosticSeverity.Error
    assert "signal" in err.message or "killed" in err.message, err.message
    state = await status(client)
    assert state["engine_runs"] == 1 and state["open_documents"] == 1
    assert not [p for p in descendants(server_pid) if "grist_lsp.dynamic" in cmdline(p)]


async def test_cancelling_the_progress_stops_the_run(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"budget": 3})
    slow = "import time\nimport torch\n\nx = torch.randn(3)\ntime.sleep(600)\ny = torch.log(x)\n"
    uri = open_file(client, tmp_path / "slow.py", slow)
    await wait_for(client, lambda: any(client.progress_reports.values()), "the run to begin")
    assert published_for(client, uri, 1) is not None  # static diagnostics come before the run
    (token,) = [t for t, r in client.progress_reports.items() if r]
    assert client.progress_reports[token][0].cancellable is True

    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await wait_for(
        client,
        lambda: isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd),
        "the run to end",
    )
    assert client.progress_reports[token][-1].message == "cancelled"
    state = await status(client)
    assert state["running"] == [] and state["engine_runs"] == 1
    # Static diagnostics stay; closing the file clears them.
    assert [d.code for d in published_for(client, uri, 1)] == [KINDS["log"].code]
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await wait_for(
        client,
        lambda: client.publications[-1].uri == uri and not client.publications[-1].diagnostics,
        "cleared diagnostics",
    )


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_exit_during_a_run_stops_its_workers_at_once(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"budget": 3})
    slow = "import time\nimport torch\n\nx = torch.randn(3)\ntime.sleep(600)\ny = torch.log(x)\n"
    open_file(client, tmp_path / "slow.py", slow)
    await wait_for(client, lambda: any(client.progress_reports.values()), "the run to begin")
    server = client._server
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    workers: list[int] = []
    while not workers and loop.time() < deadline:
        workers = [p for p in descendants(server.pid) if "grist_lsp.dynamic" in cmdline(p)]
        await asyncio.sleep(0.1)
    assert workers

    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.wait_for(server.wait(), WAIT)
    client.capabilities = None  # the session is over: the fixture must not shut it down again
    assert server.returncode == 0
    for _ in range(int(WAIT / 0.05)):
        if not any(alive(p) for p in workers):
            break
        await asyncio.sleep(0.05)
    assert not [p for p in workers if alive(p)]


async def test_hanging_program_gives_error_at_its_line(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"budget": 1, "dynamic": {"enable": True, "timeout": 2}})
    hang = "import torch\n\nx = torch.randn(3)\nwhile True:\n    pass\ny = torch.log(x)\n"
    uri = open_file(client, tmp_path / "hang.py", hang)
    await wait_for(
        client,
        lambda: any(d.code == ERROR_CODE for d in published_for(client, uri, 1) or []),
        "an error verdict",
    )
    (err,) = [d for d in published_for(client, uri, 1) if d.code == ERROR_CODE]
    assert err.severity == types.DiagnosticSeverity.Error
    assert err.range.start.line in (3, 4), err  # the loop the program hangs in
    assert (await status(client))["running"] == []


async def test_turning_dynamic_off_stops_the_running_check(client: LanguageClient, tmp_path: Path) -> None:
    await start(client, tmp_path, {"budget": 3})
    slow = "import time\nimport torch\n\nx = torch.randn(3)\ntime.sleep(600)\ny = torch.log(x)\n"
    uri = open_file(client, tmp_path / "slow.py", slow)
    await wait_for(client, lambda: any(client.progress_reports.values()), "the run to begin")
    (token,) = [t for t, r in client.progress_reports.items() if r]

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"grist": {"dynamic": {"enable": False}}})
    )
    await wait_for(
        client,
        lambda: isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd),
        "the run to end",
    )
    assert client.progress_reports[token][-1].message == "cancelled"
    state = await status(client)
    assert state["running"] == [] and state["dynamic_allowed"] is False
    assert [d.severity for d in published_for(client, uri, 1) if d.code == KINDS["log"].code] == [
        types.DiagnosticSeverity.Warning
    ]
