"""The server's pure pieces: column conversion, words, severities, settings, code-action edits.

No server process here: these are the rules the stdio tests rely on, checked
one case at a time (surrogate pairs, empty spans, every settings shape).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from lsprotocol import types

from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS
from grist_lsp.model import Fix, Site, Span, Status, TensorValue, TextEdit, Verdict, Witness, file_error
from grist_lsp.server import actions, diagnostics
from grist_lsp.server.settings import Settings, client_trust, merge_settings

UTF8 = types.PositionEncodingKind.Utf8
UTF16 = types.PositionEncodingKind.Utf16
UTF32 = types.PositionEncodingKind.Utf32


def site(
    line: int, start: int, end: int, kind: str = "log", op: str = "torch.log", text: str = "torch.log(x)"
) -> Site:
    return Site(
        file="/w/m.py", span=Span(line, start, line, end), op=op, kind=kind, operand="input", text=text
    )


def witness(**kw) -> Witness:
    base = dict(
        entry="entry:m.py:make",
        inputs={"logits": TensorValue(shape=[1, 2], dtype="float32", values=[[103.0, 0.0]])},
        weights_moved={},
        operand=TensorValue(shape=[], dtype="float32", values=0.0),
        result="-inf",
    )
    base.update(kw)
    return Witness(**base)


# --- columns -------------------------------------------------------------------


def test_columns_count_utf16_units_utf8_bytes_or_code_points() -> None:
    line = 'a = "é😀"; y = torch.log(x)'
    col = line.index("torch")  # code points
    lines = [line]
    assert diagnostics.to_position(lines, 1, col, UTF32).character == col
    assert diagnostics.to_position(lines, 1, col, UTF16).character == col + 1  # 😀 is a surrogate pair
    assert diagnostics.to_position(lines, 1, col, UTF8).character == col + 1 + 3  # é: 2 bytes, 😀: 4


def test_units_to_codepoints_inverts_units() -> None:
    line = "é😀x = torch.log(y)"
    for encoding in (UTF8, UTF16, UTF32):
        for col in range(len(line) + 1):
            client = diagnostics.units(line[:col], encoding)
            assert diagnostics.units_to_codepoints(line, client, encoding) == col


def test_lines_split_only_on_lsp_line_breaks() -> None:
    # \x0c (form feed) is whitespace inside a line for LSP, a line break for str.splitlines.
    assert diagnostics.split_lines("a\x0cb\r\nc\rd\ne") == ["a\x0cb", "c", "d", "e"]


def test_empty_span_covers_the_line() -> None:
    rng = diagnostics.to_range(["import torch", "    def f(:"], Span(2, 0, 2, 0), UTF16)
    assert (rng.start.line, rng.start.character, rng.end.character) == (1, 4, len("    def f(:"))


def test_span_past_the_end_is_clamped() -> None:
    rng = diagnostics.to_range(["x = 1"], Span(9, 0, 9, 3), UTF16)
    assert rng.start.line == 0


# --- diagnostics -----------------------------------------------------------------


def test_severity_follows_status_and_settings() -> None:
    on, off = Settings(show_safe=True), Settings(show_possible=False)
    confirmed = Verdict(site(1, 0, 3), Status.CONFIRMED, witness=witness())
    possible = Verdict(site(1, 0, 3), Status.POSSIBLE)
    safe = Verdict(site(1, 0, 3), Status.SAFE, reason="operand >= 1e-8 after clamp_min")
    error = file_error("/w/m.py", "syntax error", line=1)
    assert diagnostics.severity_for(confirmed, off) == types.DiagnosticSeverity.Error
    assert diagnostics.severity_for(error, off) == types.DiagnosticSeverity.Error
    assert diagnostics.severity_for(possible, on) == types.DiagnosticSeverity.Warning
    assert diagnostics.severity_for(possible, off) is None
    assert diagnostics.severity_for(safe, on) == types.DiagnosticSeverity.Hint
    assert diagnostics.severity_for(safe, Settings()) is None
    assert diagnostics.rule_code(error) == ERROR_CODE and diagnostics.rule_code(possible) == KINDS["log"].code


def test_confirmed_message_names_input_operand_and_result() -> None:
    v = Verdict(site(1, 0, 12), Status.CONFIRMED, witness=witness())
    message = diagnostics.message_for(v)
    assert "torch.log receives 0 when logits = [[103, 0]]: -inf" in message
    assert "via entry:m.py:make" in message


def test_large_tensors_are_summarised() -> None:
    big = TensorValue(
        shape=[64, 64], dtype="float32", values=None, summary={"min": -3.0, "max": 4.5}, file="x.pt"
    )
    assert diagnostics.describe_tensor(big) == "tensor(shape [64, 64]; min -3, max 4.5)"  # no cache path


def test_diagnostic_carries_code_docs_data_and_entry_location(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\n\n\ndef make():\n    return f, (x,)\n", encoding="utf-8")
    v = Verdict(site(5, 4, 16), Status.CONFIRMED, witness=witness(), fixes=[Fix("clamp", [], verified=True)])
    (p,) = diagnostics.build(
        [v],
        "\n" * 4 + "    torch.log(x)\n",
        UTF16,
        Settings(),
        document_path=str(tmp_path / "m.py"),
        root=str(tmp_path),
    )
    d = p.diagnostic
    assert d.code == "GRIST101" and d.source == "grist" and "rule-codes" in d.code_description.href
    assert d.data["key"] == v.site.key and d.data["verdict"]["fixes"][0]["verified"] is True
    assert d.data["verdict"]["witness"]["result"] == "-inf"
    (related,) = d.related_information
    assert related.location.uri == (tmp_path / "m.py").as_uri()
    assert related.location.range.start.line == 3  # `def make` of the entry


def test_diagnostic_data_is_strict_json_even_for_unbounded_ranges_and_infinite_values() -> None:
    """VS Code's client refuses a message with Infinity in it (and shuts the server down)."""
    from grist_lsp.analyzer.analysis import analyze_source

    text = "import torch\n\n\ndef f(x):\n    return torch.log(x)\n"
    [v] = analyze_source("/w/m.py", text)
    assert v.operand_range is None or None in (v.operand_range.lo, v.operand_range.hi)
    inf = TensorValue(shape=[2], dtype="float32", values=[1.0, float("inf")], summary={"max": float("inf")})
    v = dataclasses.replace(v, status=Status.CONFIRMED, witness=witness(inputs={"x": inf}))
    (p,) = diagnostics.build([v], text, UTF16, Settings())
    json.dumps(p.diagnostic.data, allow_nan=False)  # raises on NaN/Infinity


def test_disabled_publishes_nothing() -> None:
    v = Verdict(site(1, 0, 3), Status.POSSIBLE)
    assert diagnostics.build([v], "abc\n", UTF16, Settings(enable=False)) == []


# --- settings --------------------------------------------------------------------


def test_settings_accept_every_client_shape() -> None:
    section = {
        "enable": True,
        "dynamic": {"enable": False},
        "budget": 3,
        "entries": ["a.py:f"],
        "showPossible": False,
        "showSafe": True,
        "workspaceTrusted": False,
    }
    expected = Settings(
        dynamic_enable=False, budget=3.0, entries=("a.py:f",), show_possible=False, show_safe=True
    )
    assert merge_settings(Settings(), section) == expected  # initializationOptions / configuration
    assert merge_settings(Settings(), {"grist": section}) == expected  # didChangeConfiguration
    assert merge_settings(Settings(), {"settings": {"grist": section}}) == expected
    assert (
        merge_settings(
            Settings(),
            {
                "grist.dynamic.enable": False,
                "grist.budget": "3",
                "grist.entries": "a.py:f",
                "grist.showPossible": False,
                "grist.showSafe": True,
            },
        )
        == expected
    )
    assert (
        client_trust(section) is False and client_trust({"grist": {}}) is None and client_trust(None) is None
    )


def test_bad_setting_values_keep_the_previous_ones() -> None:
    assert merge_settings(Settings(budget=4), {"budget": "soon", "enable": None}) == Settings(budget=4)
    assert merge_settings(Settings(), {"budget": -1}).budget == 0.0
    assert merge_settings(Settings(), {"dynamic": {"timeout": 0}}).timeout == Settings().timeout
    assert merge_settings(Settings(), {"grist": {"dynamic": {"timeout": "5"}}}).timeout == 5.0


def test_dynamic_needs_every_switch() -> None:
    assert Settings().dynamic_allowed(True)
    assert not Settings().dynamic_allowed(False)
    assert not Settings(trusted=False).dynamic_allowed(True)
    assert not Settings(dynamic_enable=False).dynamic_allowed(True)
    assert not Settings(enable=False).dynamic_allowed(True)


# --- code actions ----------------------------------------------------------------


def _published(verdict: Verdict, text: str) -> list[diagnostics.Published]:
    return diagnostics.build([verdict], text, UTF16, Settings())


def test_verified_fix_is_preferred_quickfix_with_utf16_edit() -> None:
    text = 'import torch\ns = "😀"; y = torch.log(x)\n'
    col = text.split("\n")[1].index("torch")
    fix = Fix(
        "clamp the operand",
        [TextEdit(Span(2, col, 2, col + 12), "torch.log(x.clamp_min(1e-8))")],
        verified=True,
    )
    unverified = Fix("use log_softmax", [TextEdit(Span(2, col, 2, col + 12), "y")], verified=False)
    v = Verdict(site(2, col, col + 12), Status.CONFIRMED, witness=witness(), fixes=[unverified, fix])
    published = _published(v, text)
    request = published[0].diagnostic.range
    acts = actions.code_actions(published, request, "file:///w/m.py", 7, text, UTF16)
    quick = [a for a in acts if a.kind == types.CodeActionKind.QuickFix]
    assert [a.is_preferred for a in quick] == [True, False]  # verified first
    (change,) = quick[0].edit.document_changes
    assert change.text_document.version == 7
    assert change.edits[0].range.start.character == col + 1
    reproducer = [a for a in acts if a.kind == actions.REPRODUCER_KIND]
    assert reproducer[0].command.command == actions.CREATE_REPRODUCER
    assert reproducer[0].command.arguments == ["file:///w/m.py", v.site.key]


def test_actions_filter_by_range_and_kind() -> None:
    text = "torch.log(x)\n"
    v = Verdict(site(1, 0, 12), Status.POSSIBLE, fixes=[Fix("clamp", [TextEdit(Span(1, 0, 1, 12), "z")])])
    published = _published(v, text)
    elsewhere = types.Range(
        start=types.Position(line=5, character=0), end=types.Position(line=5, character=1)
    )
    assert [a.kind for a in actions.code_actions(published, elsewhere, "u", 1, text, UTF16)] == [
        actions.RECHECK_KIND
    ]
    at = published[0].diagnostic.range
    only = actions.code_actions(published, at, "u", 1, text, UTF16, only=[types.CodeActionKind.QuickFix])
    assert [a.kind for a in only] == [types.CodeActionKind.QuickFix, actions.IGNORE_KIND]
    flat = actions.code_actions(published, at, "u", 1, text, UTF16, document_changes=False)
    assert list(flat[0].edit.changes) == ["u"]


def test_reproducer_edit_creates_then_fills_the_file(tmp_path: Path) -> None:
    folder = actions.reproducer_folder(str(tmp_path / "m.py"), str(tmp_path), "tests/grist")
    assert folder == tmp_path / "tests" / "grist"
    folder.mkdir(parents=True)
    (folder / "test_x.py").write_text("", encoding="utf-8")
    target = actions.free_name(folder, "test_x.py", exists=Path.exists)
    assert target == folder / "test_x_2.py"
    edit = actions.reproducer_edit(
        target.as_uri(), "def test_x():\n    assert True\n", resource_operations=True
    )
    create, fill = edit.document_changes
    assert (
        isinstance(create, types.CreateFile)
        and create.uri == target.as_uri()
        and not create.options.overwrite
    )
    assert fill.text_document.uri == target.as_uri() and fill.edits[0].new_text.startswith("def test_x")


# --- carrying confirmations over an edit -------------------------------------------


def test_confirmed_site_is_carried_to_its_new_place_while_rechecking() -> None:
    from grist_lsp.server.scheduler import CARRIED_NOTE, carry_over

    old_site = Site("/w/m.py", Span(6, 12, 6, 24), "torch.log", "log", "input", "torch.log(p)", "loss")
    fix = Fix("clamp", [TextEdit(Span(6, 12, 6, 24), "torch.log(p.clamp_min(1e-8))")], verified=True)
    outside = Fix(
        "log_softmax",
        [TextEdit(Span(1, 0, 1, 0), "import x\n"), TextEdit(Span(6, 12, 6, 24), "y")],
        verified=True,
    )
    previous = [
        Verdict(
            old_site,
            Status.CONFIRMED,
            witness=witness(),
            fixes=[fix, outside],
            message="torch.log receives 0",
        )
    ]
    # A comment line above and two more spaces of indentation later:
    new_site = dataclasses.replace(old_site, span=Span(7, 14, 7, 26))
    other = Site("/w/m.py", Span(9, 4, 9, 12), "torch.sqrt", "sqrt", "input", "torch.sqrt(q)", "loss")
    static = [Verdict(new_site, Status.POSSIBLE), Verdict(other, Status.POSSIBLE)]

    carried, untouched = carry_over(static, previous)
    assert carried.status is Status.CONFIRMED and carried.site == new_site
    assert carried.message == "torch.log receives 0" + CARRIED_NOTE
    (moved,) = carried.fixes  # the fix that also edits line 1 is dropped: it may not apply any more
    assert moved.edits == [TextEdit(Span(7, 14, 7, 26), "torch.log(p.clamp_min(1e-8))")]
    assert untouched == static[1]


def test_changed_site_text_is_not_carried() -> None:
    from grist_lsp.server.scheduler import carry_over

    old_site = Site("/w/m.py", Span(6, 12, 6, 24), "torch.log", "log", "input", "torch.log(p)", "loss")
    previous = [Verdict(old_site, Status.CONFIRMED, witness=witness())]
    edited = Site("/w/m.py", Span(6, 12, 6, 28), "torch.log", "log", "input", "torch.log(p + 1)", "loss")
    assert carry_over([Verdict(edited, Status.POSSIBLE)], previous)[0].status is Status.POSSIBLE
