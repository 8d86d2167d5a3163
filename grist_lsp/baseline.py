"""Finding fingerprints, and the baseline file built from them (`--write-baseline`, `--baseline`).

A fingerprint says what a finding is, not where: the file, the rule, the op and the
site's source text (whitespace-normalised), plus which occurrence of that text in the
file it is. Lines moving above a finding keep its fingerprint; SARIF's
`partialFingerprints` and the baseline both use this one function.

A baseline is JSON (sorted, one finding per entry, so it diffs well in review):

    {"version": 1, "tool": "grist-lsp",
     "findings": [{"rule": "GRIST105", "file": "pkg/boxes.py", "fingerprint": "…",
                   "status": "possible", "line": 12, "text": "x / w"}]}

Only ``rule``, ``file`` and ``fingerprint`` are matched; ``status``, ``line`` and
``text`` are there for the people reading it. Matching ignores the status, so a
baseline written with `--static-only` serves a full check too.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grist_lsp.config import ConfigError
from grist_lsp.model import Status, Verdict
from grist_lsp.suppressions import finding_code, relative_to_root

BASELINE_VERSION = 1

Key = tuple[str, str, str]  # (rule, file relative to the project root, fingerprint)


def fingerprints(verdicts: list[Verdict], uri_of: Callable[[str], str]) -> list[str]:
    """One fingerprint per verdict, for verdicts in file order (``uri_of`` names the file)."""
    seen: Counter[tuple[str, bool]] = Counter()
    out = []
    for verdict in verdicts:
        identity = (
            f"{uri_of(verdict.site.file)}\0{finding_code(verdict)}\0{verdict.site.op}\0"
            f"{' '.join(verdict.site.text.split())}"
        )
        # Proved-safe sites are numbered apart, so showing them (--show-safe) never
        # renumbers the findings that share their text.
        counter = (identity, verdict.status is Status.SAFE)
        seen[counter] += 1
        out.append(hashlib.sha256(f"{identity}\0{seen[counter]}".encode()).hexdigest()[:32])
    return out


def is_finding(verdict: Verdict) -> bool:
    """What a baseline records: an unsafe site that is `possible` or `confirmed` (not file errors)."""
    return bool(verdict.site.op) and verdict.status in (Status.POSSIBLE, Status.CONFIRMED)


def _in_file_order(verdicts: list[Verdict]) -> list[Verdict]:
    return sorted(
        verdicts, key=lambda v: (v.site.file, v.site.span.start_line, v.site.span.start_col, v.site.op)
    )


def keys(verdicts: list[Verdict], root: Path) -> list[tuple[Key, Verdict]]:
    """The baseline key of each finding among ``verdicts`` (file paths relative to ``root``)."""
    findings = _in_file_order([v for v in verdicts if is_finding(v)])
    relative: dict[str, str] = {}

    def uri_of(file: str) -> str:
        if file not in relative:
            relative[file] = relative_to_root(file, root)
        return relative[file]

    prints = fingerprints(findings, uri_of)
    return [((finding_code(v), uri_of(v.site.file), fp), v) for v, fp in zip(findings, prints)]


@dataclass(frozen=True)
class Baseline:
    """The findings a project accepted, as a multiset of keys (identical sites may repeat)."""

    source: str
    entries: Counter[Key] = field(default_factory=Counter)

    def leave_out(self, verdicts: list[Verdict], root: Path) -> tuple[list[Verdict], int]:
        """``verdicts`` without the findings in the baseline, and how many were left out."""
        remaining = Counter(self.entries)
        dropped: set[int] = set()
        for key, verdict in keys(verdicts, root):
            if remaining[key] > 0:
                remaining[key] -= 1
                dropped.add(id(verdict))
        return [v for v in verdicts if id(v) not in dropped], len(dropped)


def read_baseline(path: Path, where: str) -> Baseline:
    """Load a baseline file; a missing or malformed one is a usage error naming ``where`` it was set."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{where}: baseline file {path} does not exist; "
            "create it with `grist-lsp --check --write-baseline FILE`"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read baseline file {path} ({exc.strerror})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{where}: baseline file {path} is not valid JSON ({exc}); write it again with --write-baseline"
        ) from exc
    findings = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(findings, list) or data.get("version") != BASELINE_VERSION:
        raise ConfigError(
            f"{where}: {path} is not a grist-lsp baseline (version {BASELINE_VERSION} with a "
            "`findings` list); write it again with --write-baseline"
        )
    entries: Counter[Key] = Counter()
    for index, item in enumerate(findings):
        if not (
            isinstance(item, dict)
            and all(isinstance(item.get(k), str) for k in ("rule", "file", "fingerprint"))
        ):
            raise ConfigError(
                f"{where}: {path}: finding #{index + 1} lacks rule, file or fingerprint; "
                "write the baseline again with --write-baseline"
            )
        entries[(item["rule"], item["file"], item["fingerprint"])] += 1
    return Baseline(source=str(path), entries=entries)


def render_baseline(verdicts: list[Verdict], root: Path) -> str:
    """The baseline file's text for today's findings."""
    findings = [
        {
            "rule": rule,
            "file": file,
            "fingerprint": fp,
            "status": v.status.value,
            "line": v.site.span.start_line,
            "text": " ".join(v.site.text.split()),
        }
        for (rule, file, fp), v in keys(verdicts, root)
    ]
    findings.sort(key=lambda f: (f["file"], f["line"], f["rule"], f["fingerprint"]))
    data = {"version": BASELINE_VERSION, "tool": "grist-lsp", "findings": findings}
    return json.dumps(data, indent=2) + "\n"
