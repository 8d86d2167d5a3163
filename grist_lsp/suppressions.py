"""Which findings a project has silenced: `# grist: ignore[...]` comments and rule selection.

A comment silences the sites on its line, the way linters' `# noqa` does:

    y = x / w  # grist: ignore[GRIST105] -- widths are >= 0
    z = torch.log(p)  # grist: ignore            (every rule)

It counts on the first or the last line of a site that spans lines (formatters move
trailing comments to the closing line). Comments are found with `tokenize`, so text
inside a string never counts. `[tool.grist]` `select` / `ignore` / `per-file-ignores`
choose rules by code for the whole project or for files matching a pattern.
Only `possible`/`confirmed` sites use a suppression: a proved-safe site needs none.
"""

from __future__ import annotations

import fnmatch
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS, rule_code
from grist_lsp.discovery import own_path
from grist_lsp.model import Status, Verdict

UNUSED_CODE = "GRIST001"  # an unused suppression comment, reported with --show-unused-suppressions
UNUSED_TITLE = "unused suppression"

# `grist: ignore`, optionally `[CODE, CODE]`, optionally a reason; anywhere in a comment so it
# can share the line with other tools' comments (noqa, type: ignore).
_DIRECTIVE = re.compile(r"(?:^|#)\s*grist:\s*ignore(?P<bracket>\[(?P<codes>[^\]]*)\])?(?P<rest>.*)$", re.I)


def rule_codes() -> list[str]:
    """The codes a user may select, ignore or suppress (the op rules; errors are never silenced)."""
    return sorted(kind.code for kind in KINDS.values())


def finding_code(verdict: Verdict) -> str:
    """The rule code of a verdict (`GRIST000` for a file that could not be analysed or run)."""
    if verdict.status is Status.ERROR:
        return ERROR_CODE
    return rule_code(verdict.site.kind)


@dataclass(frozen=True)
class Suppression:
    """One `# grist: ignore` comment. ``codes`` is None for a bare comment (every rule)."""

    line: int  # 1-based
    col: int  # 0-based code point of the `#`
    end_col: int
    codes: frozenset[str] | None
    reason: str
    comment: str  # the whole comment token, as written

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


def _directive(comment: str) -> tuple[frozenset[str] | None, str] | None:
    match = _DIRECTIVE.search(comment)
    if match is None:
        return None
    codes: frozenset[str] | None = None
    if match.group("bracket") is not None:
        codes = frozenset(c.strip().upper() for c in match.group("codes").split(",") if c.strip())
    rest = match.group("rest")
    if rest and not rest[0].isspace() and rest[0] not in "-:#":
        return None  # `grist: ignored` or `ignore[...]x`: not the directive
    reason = rest.strip().lstrip("-:#").strip()
    return codes, reason


def is_directive(comment: str) -> bool:
    """Whether a comment token holds a `grist: ignore` directive."""
    return _directive(comment) is not None


def comment_tokens(text: str, last_line: int | None = None) -> list[tokenize.TokenInfo]:
    """The comment tokens of ``text`` up to ``last_line``; a file that does not tokenize gives those before the error."""
    found: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if last_line is not None and token.start[0] > last_line:
                break
            if token.type == tokenize.COMMENT:
                found.append(token)
    except (tokenize.TokenError, SyntaxError):
        pass  # the static pass reports the syntax error; comments before it still count
    return found


def find_suppressions(text: str) -> list[Suppression]:
    """Every `# grist: ignore` comment of ``text``, in order."""
    # tokenize is pure Python (~0.1 s for 2,000 lines): skip it when no line can hold a
    # directive, and stop after the last line that might.
    candidates = [number for number, line in enumerate(text.splitlines(), 1) if "grist" in line.lower()]
    if not candidates:
        return []
    out = []
    for token in comment_tokens(text, last_line=max(candidates)):
        parsed = _directive(token.string)
        if parsed is None:
            continue
        codes, reason = parsed
        out.append(
            Suppression(
                line=token.start[0],
                col=token.start[1],
                end_col=token.end[1],
                codes=codes,
                reason=reason,
                comment=token.string,
            )
        )
    return out


@dataclass(frozen=True)
class RuleSelection:
    """`select` / `ignore` / `per-file-ignores` of `[tool.grist]`, by rule code."""

    select: frozenset[str] | None = None  # None: every rule
    ignore: frozenset[str] = frozenset()
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()  # (pattern, codes), in the order written

    def ignored(self, code: str, relative: str) -> bool:
        """Whether ``code`` is switched off for the file at ``relative`` (a path relative to the project root)."""
        if self.select is not None and code not in self.select:
            return True
        if code in self.ignore:
            return True
        if not self.per_file_ignores:
            return False
        name = PurePosixPath(relative).name
        for pattern, codes in self.per_file_ignores:
            if code in codes and (
                fnmatch.fnmatchcase(relative, pattern)
                or ("/" not in pattern and fnmatch.fnmatchcase(name, pattern))
            ):
                return True
        return False


def relative_to_root(path: str, root: Path) -> str:
    """``path`` relative to the project root, with `/`; the absolute path when outside it. A
    symlink is named by its own path, not its target's: patterns match what the tree shows."""
    absolute = own_path(path)
    try:
        return absolute.relative_to(root.resolve()).as_posix()
    except ValueError:
        return absolute.as_posix()


@dataclass
class Silenced:
    """What ``silence`` kept and dropped for one file."""

    kept: list[Verdict]
    by_comment: int = 0
    by_rule: int = 0
    unused: list[Suppression] = field(default_factory=list)


def _is_finding(verdict: Verdict) -> bool:
    return bool(verdict.site.op) and verdict.status in (Status.POSSIBLE, Status.CONFIRMED)


def silence(verdicts: list[Verdict], text: str | None, relative: str, rules: RuleSelection) -> Silenced:
    """Drop the findings that the rule selection or a suppression comment switches off.

    Rules go first, so a comment for a rule the project already ignores is reported unused.
    """
    suppressions = find_suppressions(text) if text else []
    by_line: dict[int, list[Suppression]] = {}
    for s in suppressions:
        by_line.setdefault(s.line, []).append(s)
    used: set[Suppression] = set()
    result = Silenced(kept=[])
    for verdict in verdicts:
        if not _is_finding(verdict):
            result.kept.append(verdict)
            continue
        code = finding_code(verdict)
        if rules.ignored(code, relative):
            result.by_rule += 1
            continue
        span = verdict.site.span
        lines = {span.start_line, span.end_line}
        matching = [s for line in sorted(lines) for s in by_line.get(line, []) if s.covers(code)]
        if matching:
            used.update(matching)
            result.by_comment += 1
            continue
        result.kept.append(verdict)
    result.unused = [s for s in suppressions if s not in used]
    return result


def unused_words(suppression: Suppression) -> str:
    """What an unused suppression is and what to do, for every output format."""
    return f"{UNUSED_TITLE}: `{suppression.comment.strip()}` matched no finding on this line; remove it"


def new_comment(codes: list[str]) -> str:
    return f"# grist: ignore[{', '.join(sorted(set(codes)))}]"


def extend_comment(comment: str, codes: list[str]) -> str:
    """``comment`` (holding a directive) changed to silence ``codes`` too; the rest of it kept as written."""
    match = _DIRECTIVE.search(comment)
    if match is None or match.group("bracket") is None:
        return comment  # a bare `grist: ignore` already covers every rule
    present = {c.strip().upper() for c in match.group("codes").split(",") if c.strip()}
    merged = ", ".join(sorted(present | set(codes)))
    return comment[: match.start("bracket")] + f"[{merged}]" + comment[match.end("bracket") :]
