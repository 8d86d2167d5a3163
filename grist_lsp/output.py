"""Render a `Report` as text, JSON (the stable v1 contract) or SARIF 2.1.0.

Positions leave the core's convention here: lines stay 1-based, columns become
1-based (the core's are 0-based code points, end exclusive, so both start and
end columns get +1 and the end stays exclusive). Rule codes come from
`catalogue.KINDS`; `GRIST000` is a file that could not be analysed or run.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path
from typing import Any

from grist_lsp import __version__
from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS
from grist_lsp.baseline import fingerprints
from grist_lsp.check import Report
from grist_lsp.discovery import own_path
from grist_lsp.model import Span, Status, TensorValue, Verdict, Witness, counted, finite_json, to_json
from grist_lsp.notebooks import Notebook
from grist_lsp.policy import input_scale_words
from grist_lsp.suppressions import UNUSED_CODE, UNUSED_TITLE, Suppression, finding_code, unused_words

JSON_VERSION = 1
TOOL_NAME = "grist-lsp"
HOMEPAGE = "https://github.com/grist-lsp/grist-lsp"
RULES_URI = f"{HOMEPAGE}#rule-codes"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ERROR_TITLE = "file could not be analysed or run"
FORMATS = ("text", "json", "sarif")


def rule_code(verdict: Verdict) -> str:
    return finding_code(verdict)


def display_path(file: str, base: Path | None = None) -> str:
    """A path as people type it: relative to ``base`` (the cwd) when inside it, else absolute; always `/`."""
    base = (base or Path.cwd()).resolve()
    path = Path(file)
    absolute = own_path(path) if path.is_absolute() or path.exists() else (base / path)
    try:
        return absolute.relative_to(base).as_posix()
    except ValueError:
        return absolute.as_posix()


def display_entry(entry: str, base: Path | None = None) -> str:
    """Text naming absolute paths (`script:/abs/train.py`) with paths under ``base`` made relative."""
    prefix = (base or Path.cwd()).resolve().as_posix().rstrip("/") + "/"
    return entry.replace(prefix, "")


def _what(verdict: Verdict) -> str:
    """Which code, in the user's own spelling when it fits on a line."""
    text = verdict.site.text.strip()
    if text and "\n" not in text and len(text) <= 60:
        return f"`{text}`"
    return verdict.site.op or verdict.site.kind


def message(verdict: Verdict, base: Path | None = None) -> str:
    """The one-line finding message shared by every format (paths under ``base`` shown relative)."""
    return display_entry(_message(verdict), base)


def _message(verdict: Verdict) -> str:
    if verdict.status is Status.ERROR:
        text = verdict.message or verdict.reason or ERROR_TITLE
        # The location is already printed in front; drop a repeated "path:line:" prefix.
        return re.sub(rf"^{re.escape(verdict.site.file)}(:\d+)*: ", "", text)
    kind = KINDS.get(verdict.site.kind)
    title = kind.title if kind else verdict.site.kind
    # The core's own message names the op and the evidence; lead with the rule's
    # words only when it does not already say them.
    if verdict.message:
        return verdict.message if title in verdict.message else f"{title}: {verdict.message}"
    return f"{_what(verdict)}: {title}"


def detail(verdict: Verdict, base: Path | None = None) -> str:
    """The parts of the reason that the message (and the witness line) do not already say."""
    return display_entry(_detail(verdict), base)


def _detail(verdict: Verdict) -> str:
    if verdict.status is Status.ERROR or not verdict.reason or verdict.witness is not None:
        return ""
    said = verdict.message
    return "; ".join(part for part in verdict.reason.split("; ") if part and part not in said)


def visible(report: Report, show_safe: bool) -> list[Verdict]:
    return [v for v in report.verdicts if show_safe or v.status is not Status.SAFE]


# --- text ----------------------------------------------------------------------


def _tensor_brief(name: str, value: TensorValue) -> str:
    if value.values is not None:
        shown = json.dumps(value.values)
        if len(shown) <= 60:
            return f"{name}={shown}"
    shape = "x".join(str(d) for d in value.shape) or "scalar"
    return f"{name}: {value.dtype}[{shape}]"


def _witness_line(witness: Witness, base: Path | None) -> str:
    parts = [
        f"entry {display_entry(witness.entry, base)}" + "".join(f" {shlex.quote(a)}" for a in witness.argv)
    ]
    if witness.inputs:
        parts.append("inputs " + ", ".join(witness.input_words(_tensor_brief)))
    scale = input_scale_words(witness)
    if scale:
        parts.append(scale)
    if witness.steps is not None:
        parts.append(f"the state after {counted(witness.steps, 'step')} of the program's own training")
    if witness.weights_moved:
        moved = max(witness.weights_moved.values())
        parts.append(f"weights moved up to {moved:.3g}")
    parts.append(
        f"{witness.result} in the {witness.phase} pass after {counted(witness.iterations, 'iteration')} "
        f"({witness.seconds:.2f} s)"
    )
    if witness.reproducer:
        parts.append(f"reproducer {display_path(witness.reproducer, base)}")
    return "    witness: " + "; ".join(parts)


Notebooks = dict[str, Notebook]


def _point(line: int, col: int) -> Span:
    return Span(line, col, line, col)


def cell_span(file: str, span: Span, notebooks: Notebooks) -> tuple[int | None, Span]:
    """(cell number, span in the cell) for a notebook's script span; (None, span) in a ``.py`` file."""
    notebook = notebooks.get(file)
    return (None, span) if notebook is None else notebook.cell_span(span)


def location(file: str, line: int, col: int, notebooks: Notebooks, base: Path | None = None) -> str:
    """``path:line:col`` (1-based column), ``path:cell N:line:col`` in a notebook (as ruff says it)."""
    cell, span = cell_span(file, _point(line, col), notebooks)
    where = f"cell {cell}:" if cell is not None else ""
    return f"{display_path(file, base)}:{where}{span.start_line}:{span.start_col + 1}"


def in_cells(file: str, notebooks: Notebooks, words: str) -> str:
    """``words`` about ``file`` with a notebook's script lines said as cells (``Notebook.in_cells``)."""
    notebook = notebooks.get(file)
    return words if notebook is None else notebook.in_cells(words)


def render_text(report: Report, show_safe: bool = False, base: Path | None = None) -> str:
    """`path:line:col: GRIST### [status] message` lines (`path:cell N:line:col` in a notebook),
    then a summary line."""
    lines: list[str] = []
    for v in visible(report, show_safe):
        span = v.site.span
        cells = functools.partial(in_cells, v.site.file, report.notebooks)
        extra = cells(detail(v, base))
        reason = f" ({extra})" if extra else ""
        lines.append(
            f"{location(v.site.file, span.start_line, span.start_col, report.notebooks, base)}: "
            f"{rule_code(v)} [{v.status.value}] {cells(message(v, base))}{reason}"
        )
        if v.witness is not None:
            lines.append(cells(_witness_line(v.witness, base)))
        for fix in v.fixes:
            lines.append(f"    fix{' (verified)' if fix.verified else ''}: {fix.title}")
    for file, suppression in report.unused_suppressions:
        lines.append(
            f"{location(file, suppression.line, suppression.col, report.notebooks, base)}: {UNUSED_CODE} "
            f"[unused] {unused_words(suppression)}"
        )
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def summary(report: Report) -> str:
    s = report.stats
    files = counted(s.get("files", len(report.files)), "file")
    if s.get("cached"):
        files += f" ({s['cached']} from the cache)"
    counts = [f"{s.get(k, 0)} {k}" for k in ("confirmed", "possible", "error") if s.get(k, 0)]
    safe = f"; {counted(s['safe'], 'site')} proved safe" if s.get("safe") else ""
    fixed = f"; fixed {len(report.fixed)}" if report.fixed else ""
    left = "".join(
        f"; {s[key]} {words}"
        for key, words in (("suppressed", "suppressed"), ("baselined", "left out by the baseline"))
        if s.get(key)
    )
    mode = "" if s.get("dynamic", False) else " (static pass only)"
    if not counts:
        return f"No NaN/INF findings in {files}{safe}{left}{fixed}{mode}."
    return f"Found {', '.join(counts)} in {files}{safe}{left}{fixed}{mode}."


# --- JSON ----------------------------------------------------------------------


def _witness_json(witness: Witness | None, base: Path | None) -> dict[str, Any] | None:
    if witness is None:
        return None
    return {
        "entry": display_entry(witness.entry, base),
        "iterations": witness.iterations,
        "seconds": witness.seconds,
        "inputs": to_json(witness.inputs),
        # Input key -> the variable that held it, for keys that are not names themselves.
        "input_names": dict(witness.names),
        # How far the inputs went, as a factor of the program's own largest |input|.
        "beyond_examples": witness.beyond_examples,
        "input_scale": input_scale_words(witness) or None,
        "weights_moved": to_json(witness.weights_moved),
        # Training steps that led to the witness's state (GRIST's training mode), else null.
        "steps": witness.steps,
        # The command-line arguments a script entry ran with (`script-args`), else [].
        "argv": list(witness.argv),
        "reproducer": display_path(witness.reproducer, base) if witness.reproducer else None,
    }


def finding_json(v: Verdict, base: Path | None = None, notebooks: Notebooks | None = None) -> dict[str, Any]:
    cell, span = cell_span(v.site.file, v.site.span, notebooks or {})
    return {
        "file": display_path(v.site.file, base),
        # A notebook's code cell (numbered as the editor shows cells), lines then counted in it; else null.
        "cell": cell,
        "line": span.start_line,
        "column": span.start_col + 1,
        "end_line": span.end_line,
        "end_column": span.end_col + 1,
        "op": v.site.op,
        "kind": v.site.kind,
        "status": v.status.value,
        "message": in_cells(v.site.file, notebooks or {}, message(v, base)),
        "reason": in_cells(v.site.file, notebooks or {}, display_entry(v.reason, base)),
        "witness": _witness_json(v.witness, base),
        "fixes": [{"title": f.title, "verified": f.verified} for f in v.fixes],
        # Why an `error` finding's file could not be checked (model.ERROR_KINDS), else null.
        "error_kind": (v.error_kind or "other") if v.status is Status.ERROR else None,
    }


def _unused_json(
    file: str, suppression: Suppression, base: Path | None, notebooks: Notebooks
) -> dict[str, Any]:
    cell, span = cell_span(file, _point(suppression.line, suppression.col), notebooks)
    return {
        "file": display_path(file, base),
        "cell": cell,
        "line": span.start_line,
        "column": span.start_col + 1,
        "code": UNUSED_CODE,
        "comment": suppression.comment,
        "message": unused_words(suppression),
    }


def render_json(report: Report, show_safe: bool = False, base: Path | None = None) -> str:
    data: dict[str, Any] = {
        "version": JSON_VERSION,
        "findings": [finding_json(v, base, report.notebooks) for v in visible(report, show_safe)],
        "stats": report.stats,
    }
    if report.unused_suppressions:
        data["unused_suppressions"] = [
            _unused_json(f, s, base, report.notebooks) for f, s in report.unused_suppressions
        ]
    return json.dumps(finite_json(data), indent=2, allow_nan=False) + "\n"


# --- SARIF ---------------------------------------------------------------------

_UNUSED_RULE = {
    "id": UNUSED_CODE,
    "name": "UnusedSuppression",
    "shortDescription": {"text": UNUSED_TITLE},
    "fullDescription": {"text": "A `# grist: ignore` comment that silences no finding on its line."},
    "helpUri": RULES_URI,
    "help": {"text": "Remove the comment, or name the rule of the finding on its line."},
    "defaultConfiguration": {"level": "note"},
}


def _rules() -> list[dict[str, Any]]:
    rules = [
        {
            "id": ERROR_CODE,
            "name": "AnalysisError",
            "shortDescription": {"text": ERROR_TITLE},
            "fullDescription": {
                "text": "The file could not be read, parsed or run, so its operations were not checked."
            },
            "helpUri": RULES_URI,
            "help": {
                "text": "Fix the problem the message names (syntax error, encoding, a crash of the program)."
            },
            "defaultConfiguration": {"level": "note"},
        }
    ]
    for kind in KINDS.values():
        rules.append(
            {
                "id": kind.code,
                "name": "".join(part.capitalize() for part in kind.name.split("_")) + "NonFinite",
                "shortDescription": {"text": kind.title},
                "fullDescription": {
                    "text": f"{kind.title}: NaN or INF when the operand is in {kind.region.text}."
                },
                "helpUri": RULES_URI,
                "help": {"text": f"Fix: {kind.fix_hint}."},
                "defaultConfiguration": {"level": "error"},
                "properties": {"tags": ["numerical-stability", "nan", kind.name]},
            }
        )
    return rules


_LEVEL = {Status.CONFIRMED: "error", Status.POSSIBLE: "warning", Status.ERROR: "note"}


def _relative_uri(file: str, root: Path) -> str:
    path = own_path(file)
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_uri()


def render_sarif(report: Report, show_safe: bool = False) -> str:
    """SARIF 2.1.0 as GitHub code scanning reads it: URIs relative to the repository root (%SRCROOT%)."""
    rules = _rules() + ([_UNUSED_RULE] if report.unused_suppressions else [])
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    shown = visible(report, show_safe)
    prints = fingerprints(shown, lambda file: _relative_uri(file, report.root))
    results = [_sarif_result(v, fingerprint, report, index) for v, fingerprint in zip(shown, prints)]
    for file, suppression in report.unused_suppressions:
        results.append(
            {
                "ruleId": UNUSED_CODE,
                "ruleIndex": index[UNUSED_CODE],
                "level": "note",
                "message": {"text": unused_words(suppression)},
                "locations": _sarif_locations(
                    _relative_uri(file, report.root),
                    _region(file, _point(suppression.line, suppression.col), report),
                ),
            }
        )
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": HOMEPAGE,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": report.root.resolve().as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(finite_json(sarif), indent=2, allow_nan=False) + "\n"


def _sarif_result(v: Verdict, fingerprint: str, report: Report, index: dict[str, int]) -> dict[str, Any]:
    """One verdict as a SARIF result (rule indexes from ``index``)."""
    code = rule_code(v)
    region = _region(v.site.file, v.site.span, report)
    text = message(v, report.root)
    if detail(v, report.root):
        text += f" ({detail(v, report.root)})"
    if v.witness is not None:
        text += f". Witness: {_witness_line(v.witness, report.root).strip()[len('witness: ') :]}"
    text = in_cells(v.site.file, report.notebooks, text)
    result: dict[str, Any] = {
        "ruleId": code,
        "ruleIndex": index.get(code, 0),
        "message": {"text": text},
        "locations": _sarif_locations(_relative_uri(v.site.file, report.root), region),
        "partialFingerprints": {"gristFinding/v1": fingerprint},
        "properties": {"status": v.status.value, "op": v.site.op, "kind": v.site.kind},
    }
    cell, in_cell = cell_span(v.site.file, v.site.span, report.notebooks)
    if cell is not None:
        result["properties"].update(cell=cell, cellLine=in_cell.start_line, cellColumn=in_cell.start_col + 1)
    if v.status is Status.SAFE:
        # A proved-safe site is a "pass"; SARIF requires level none for it.
        result.update(kind="pass", level="none")
    else:
        result["level"] = _LEVEL[v.status]
    return result


def _region(file: str, span: Span, report: Report) -> dict[str, int]:
    """A SARIF region of ``span``. In a notebook it is where the ``.ipynb`` file holds the
    cell's source line (a code-scanning viewer shows the file as it is, JSON included)."""
    notebook = report.notebooks.get(file)
    start = (span.start_line, span.start_col + 1)
    end = (span.end_line, span.end_col + 1)
    if notebook is not None:
        start = notebook.file_position(span.start_line, span.start_col)
        end = (
            notebook.file_position(span.end_line, span.end_col) if span.end_line == span.start_line else start
        )
    region: dict[str, int] = {"startLine": max(1, start[0]), "startColumn": start[1]}
    if end > start:
        region.update(endLine=end[0], endColumn=end[1])
    return region


def _sarif_locations(uri: str, region: dict[str, int]) -> list[dict[str, Any]]:
    """A SARIF result's one location: a region of a file relative to %SRCROOT%."""
    return [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                "region": region,
            }
        }
    ]


def render(report: Report, fmt: str, show_safe: bool = False) -> str:
    if fmt == "json":
        return render_json(report, show_safe)
    if fmt == "sarif":
        return render_sarif(report, show_safe)
    return render_text(report, show_safe)
