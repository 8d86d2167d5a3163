"""Verdicts -> LSP diagnostics: ranges in the client's units, severities, words, payload.

The core counts columns in code points; LSP counts UTF-16 code units unless the
client negotiated another ``positionEncoding``. Everything here is a pure
function of (verdicts, text, settings) so it is tested without a server.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from lsprotocol.converters import get_converter

from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS
from grist_lsp.model import Span, Status, TensorValue, Verdict, Witness, finite_json, to_json
from grist_lsp.server.settings import Settings

SOURCE = "grist"
types_converter = get_converter()  # lsprotocol's (stateless) JSON converter, for result ids
DOCS_URL = "https://github.com/grist-lsp/grist-lsp/blob/main/README.md"


def docs_url(code: str) -> str:
    """Where a rule code is explained: the README's rule-code table (one row per code)."""
    return f"{DOCS_URL}#rule-codes"


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # LSP's line terminators, and only those


def split_lines(text: str) -> list[str]:
    """Lines as LSP counts them (``str.splitlines`` also splits on \\f, \\x1c ...)."""
    return _LINE_BREAK.split(text)


def units(chars: str, encoding: str) -> int:
    """Length of ``chars`` in the client's position units."""
    if encoding == types.PositionEncodingKind.Utf32:
        return len(chars)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(chars.encode("utf-8", errors="surrogatepass"))
    return len(chars.encode("utf-16-le", errors="surrogatepass")) // 2


def units_to_codepoints(line: str, column: int, encoding: str) -> int:
    """Inverse of ``units``: the code-point column at client column ``column``."""
    if encoding == types.PositionEncodingKind.Utf32:
        return min(column, len(line))
    count = 0
    for index, char in enumerate(line):
        if count >= column:
            return index
        count += units(char, encoding)
    return len(line)


def to_position(lines: list[str], line: int, col: int, encoding: str) -> types.Position:
    """Core position (1-based line, 0-based code points) -> LSP position."""
    row = max(0, line - 1)
    if row >= len(lines):
        # Past the end (a stale span): clamp to the end of the document.
        return types.Position(
            line=max(0, len(lines) - 1), character=units(lines[-1], encoding) if lines else 0
        )
    text = lines[row]
    return types.Position(line=row, character=units(text[: max(0, col)], encoding))


def to_range(lines: list[str], span: Span, encoding: str) -> types.Range:
    start = to_position(lines, span.start_line, span.start_col, encoding)
    end = to_position(lines, span.end_line, span.end_col, encoding)
    if (end.line, end.character) <= (start.line, start.character):
        # An empty range (file-level errors) is invisible in most editors: cover the line.
        row = start.line
        if row < len(lines) and lines[row].strip():
            stripped = len(lines[row]) - len(lines[row].lstrip())
            start = types.Position(line=row, character=units(lines[row][:stripped], encoding))
            end = types.Position(line=row, character=units(lines[row], encoding))
        else:
            end = types.Position(line=row, character=start.character + 1)
    return types.Range(start=start, end=end)


def to_span(lines: list[str], rng: types.Range, encoding: str) -> Span:
    """LSP range -> core span (used to match code-action requests to verdicts)."""

    def point(pos: types.Position) -> tuple[int, int]:
        row = min(pos.line, max(0, len(lines) - 1))
        text = lines[row] if lines else ""
        return row + 1, units_to_codepoints(text, pos.character, encoding)

    (sl, sc), (el, ec) = point(rng.start), point(rng.end)
    return Span(sl, sc, el, ec)


# --- words -------------------------------------------------------------------


def _number(x: Any) -> str:
    if isinstance(x, float):
        if x != x:
            return "nan"
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        return f"{x:.6g}" if abs(x) < 1e6 else f"{x:.3g}"
    return str(x)


def _nested(values: Any) -> str:
    if isinstance(values, (list, tuple)):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return _number(values)


def describe_tensor(value: TensorValue | None, limit: int = 80) -> str:
    """A tensor the way a person reads it: the values if short, else shape and range."""
    if value is None:
        return "?"
    if value.values is not None:
        shown = _nested(value.values)
        if len(shown) <= limit:
            return shown
    parts = [f"shape {list(value.shape)}"]
    if value.summary:
        parts.append(", ".join(f"{k} {_number(v)}" for k, v in value.summary.items()))
    # value.file (a payload in grist's cache) is never named here: the input's name says which
    # tensor it is, and "Create reproducer test" writes it out beside the test.
    return f"tensor({'; '.join(parts)})"


def _operand_words(value: TensorValue | None) -> str:
    """The operand at failure: a single value is shown as that value."""
    if value is None:
        return "a value in its invalid region"
    if value.values is not None and not isinstance(value.values, (list, tuple)):
        return _number(value.values)
    return describe_tensor(value)


def witness_words(verdict: Verdict, witness: Witness) -> str:
    site = verdict.site
    op = site.op or site.text
    inputs = "; ".join(witness.input_words(lambda name, v: f"{name} = {describe_tensor(v)}"))
    message = f"{op} receives {_operand_words(witness.operand)}"
    if inputs:
        message += f" when {inputs}"
    message += f": {witness.result}"
    return message


def _witness_details(witness: Witness, words: str) -> str:
    details = []
    if witness.phase == "backward" and "backward" not in words:
        details.append("in the backward pass")
    if witness.weights_moved and "weight" not in words:
        details.append(f"weights moved by at most {_number(float(max(witness.weights_moved.values())))}")
    if witness.entry and witness.entry not in words:
        details.append(f"via {_short_entry(witness.entry)}")
    return f" ({', '.join(details)})" if details else ""


def _short_entry(entry: str) -> str:
    """``script:/abs/dir/train.py`` -> ``script:train.py``: the editor already shows the folder."""
    kind, _, rest = entry.partition(":")
    head, sep, tail = rest.partition("::")
    if "/" in head:
        head = head.rsplit("/", 1)[1]
    return f"{kind}:{head}{sep}{tail}" if rest else entry


def message_for(verdict: Verdict) -> str:
    """What the diagnostic says, in words a person reads."""
    site = verdict.site
    kind = KINDS.get(site.kind)
    title = kind.title if kind else site.kind
    if verdict.status is Status.CONFIRMED and verdict.witness is not None:
        # The engine words inputs by where they are created ("torch.randn(...) at line 10");
        # fall back to our own wording from the witness when it says nothing.
        words = verdict.message or witness_words(verdict, verdict.witness)
        return f"{title}: {words}{_witness_details(verdict.witness, words)}"
    if verdict.status is Status.ERROR:
        return verdict.message or verdict.reason or "the file could not be checked"
    op = site.op or "operation"
    code = f"`{site.text}`" if site.text and len(site.text) <= 60 else op
    if verdict.status is Status.SAFE:
        return f"{code} is safe: {verdict.reason or 'proved by the value ranges'}"
    text = verdict.message or f"possible {title}: {code} is not proved safe"
    if verdict.reason and verdict.reason not in text:
        text += f" ({verdict.reason})"
    return text


# --- diagnostics -------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    """One diagnostic with the verdict it came from (code actions look it up)."""

    verdict: Verdict
    diagnostic: types.Diagnostic


def severity_for(verdict: Verdict, settings: Settings) -> types.DiagnosticSeverity | None:
    """None means the verdict is not shown."""
    if verdict.status is Status.CONFIRMED or verdict.status is Status.ERROR:
        return types.DiagnosticSeverity.Error
    if verdict.status is Status.POSSIBLE:
        return types.DiagnosticSeverity.Warning if settings.show_possible else None
    if verdict.status is Status.SAFE:
        return types.DiagnosticSeverity.Hint if settings.show_safe else None
    return None


def rule_code(verdict: Verdict) -> str:
    if verdict.status is Status.ERROR:
        return ERROR_CODE
    kind = KINDS.get(verdict.site.kind)
    return kind.code if kind else ERROR_CODE


def _resolve(file_part: str, document_path: str | None, root: str | None) -> Path | None:
    """A witness's file name (absolute, or relative to the root or the document) as an existing path."""
    candidates = [Path(file_part)]
    for base in (root, str(Path(document_path).parent) if document_path else None):
        if base and not Path(file_part).is_absolute():
            candidates.append(Path(base) / file_part)
    return next((p for p in candidates if p.is_absolute() and p.is_file()), None)


def _location(path: Path, line: int) -> types.Location:
    position = types.Position(line=max(0, line), character=0)
    return types.Location(uri=path.resolve().as_uri(), range=types.Range(start=position, end=position))


def entry_location(witness: Witness, document_path: str | None, root: str | None) -> types.Location | None:
    """Where the witness entered the program (``script:a.py``, ``entry:a.py:f``, ``test:t.py::test_x``)."""
    entry = witness.entry or ""
    _, _, rest = entry.partition(":")
    if not rest:
        return None
    file_part = rest.split("::")[0]
    function = rest.split("::")[1] if "::" in rest else None
    if ".py:" in file_part:
        file_part, function = file_part.split(".py:", 1)
        file_part += ".py"
    path = _resolve(file_part, document_path, root)
    if path is None:
        return None
    line = 0
    if function:
        name = function.split(".")[-1].split("[")[0]
        try:
            for index, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
                if re.match(rf"\s*(async\s+)?(def|class)\s+{re.escape(name)}\b", text):
                    line = index
                    break
        except OSError:
            pass
    return _location(path, line)


_INPUT_KEY = re.compile(r"^(?P<file>.+?\.(?:py|ipynb)):(?P<line>\d+):(?P<what>.*)$")


def input_locations(
    witness: Witness, document_path: str | None, root: str | None
) -> list[tuple[types.Location, str]]:
    """Where each failing input is created, for inputs keyed by creation site (``a.py:10:torch.randn#0``)."""
    out = []
    for name, value in witness.inputs.items():
        match = _INPUT_KEY.match(name)
        if not match:
            continue
        path = _resolve(match["file"], document_path, root)
        if path is not None:
            what = witness.names.get(name) or match["what"].split("#")[0] or "input"
            out.append(
                (_location(path, int(match["line"]) - 1), f"failing input: {what} = {describe_tensor(value)}")
            )
    return out


def to_diagnostic(
    verdict: Verdict,
    lines: list[str],
    encoding: str,
    settings: Settings,
    *,
    document_path: str | None = None,
    root: str | None = None,
) -> types.Diagnostic | None:
    severity = severity_for(verdict, settings)
    if severity is None:
        return None
    code = rule_code(verdict)
    related = None
    if verdict.witness is not None:
        related = [
            types.DiagnosticRelatedInformation(location=location, message=message)
            for location, message in input_locations(verdict.witness, document_path, root)
        ]
        location = entry_location(verdict.witness, document_path, root)
        if location is not None:
            related.append(
                types.DiagnosticRelatedInformation(
                    location=location, message=f"entered via {_short_entry(verdict.witness.entry)}"
                )
            )
        related = related or None
    return types.Diagnostic(
        range=to_range(lines, verdict.site.span, encoding),
        message=message_for(verdict),
        severity=severity,
        source=SOURCE,
        code=code,
        code_description=types.CodeDescription(href=docs_url(code)),
        related_information=related,
        data={
            "key": verdict.site.key,
            "status": verdict.status.value,
            "verdict": finite_json(to_json(verdict)),
        },
    )


def result_id(text_hash: str, published: list[Published]) -> str:
    """A pull result id: equal exactly when the same text gets the same diagnostics."""
    digest = hashlib.sha256(text_hash.encode())
    for p in published:
        digest.update(
            json.dumps(types_converter.unstructure(p.diagnostic), sort_keys=True, default=str).encode()
        )
    return digest.hexdigest()[:32]


def build(
    verdicts: list[Verdict],
    text: str,
    encoding: str,
    settings: Settings,
    *,
    document_path: str | None = None,
    root: str | None = None,
) -> list[Published]:
    """The diagnostics to publish for ``text``, in source order."""
    if not settings.enable:
        return []
    lines = split_lines(text)
    out = []
    for verdict in sorted(verdicts, key=lambda v: v.site.span):
        diagnostic = to_diagnostic(verdict, lines, encoding, settings, document_path=document_path, root=root)
        if diagnostic is not None:
            out.append(Published(verdict, diagnostic))
    return out
