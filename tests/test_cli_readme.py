"""The README documents every rule code, and its test and check commands are the ones CI runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from grist_lsp.analyzer.catalogue import ERROR_CODE, KINDS

REPO = Path(__file__).resolve().parent.parent


def _readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_readme_lists_every_rule_code_with_its_kind() -> None:
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| (GRIST\d{3}) \| `?([a-z0-9_]+)`? \|", _readme(), re.M)
    }
    expected = {kind.code: kind.name for kind in KINDS.values()}
    expected[ERROR_CODE] = "error"
    assert rows == expected


def test_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [
        line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    last = commands[-1]
    assert last == "python -m pytest"
    assert f"pip install torch==2.13.0 && pip install -e '.[dev,ray]' && {last}" in _readme()
    # torch is installed pinned before the package, so pip never resolves a CUDA build.
    assert ci.index("pip install torch==2.13.0") < ci.index("pip install -e '.[dev,ray]'")


def test_readme_static_checks_are_the_ones_ci_runs() -> None:
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    checks = ["ruff check .", "ruff format --check .", "basedpyright", "lint-imports"]
    for check in checks:
        assert check in ci_lines, f".ci/run: no step runs `{check}`"
    # CI runs them before the tests, so a lint or type failure stops the run early.
    assert max(ci_lines.index(c) for c in checks) < ci_lines.index("python -m pytest")
    assert " && ".join(checks) in _readme()


def test_pre_commit_hooks_call_the_cli() -> None:
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    entries = re.findall(r"^\s*entry: (.+)$", hooks, re.M)
    assert entries and all(e.startswith("grist-lsp --check ") for e in entries)


def _fenced_after(text: str, anchor: str) -> tuple[str, str]:
    """The command quoted in backticks in the paragraph at ``anchor``, and the fenced block after it."""
    at = text.index(anchor)
    command = re.search(r"`(grist-lsp --check [^`]+)`", text[at:]).group(1)  # type: ignore[union-attr]
    block = re.search(r"```[a-z]*\n(.*?)```", text[at:], re.S).group(1)  # type: ignore[union-attr]
    return command, block


_FINDING = re.compile(r"^(\S+:\d+:\d+: GRIST\d{3} \[\w+\])", re.M)
_COUNTS = ("files", "confirmed", "possible", "safe", "error")


def test_the_readme_example_output_is_what_the_documented_commands_print(grist_cli) -> None:
    """The text and JSON examples come from real runs: the same findings (file, line, column,
    code, status) and the same summary line and counts. The witnesses' iterations and seconds
    are not compared: they are not the README's promise."""
    readme = _readme()
    command, shown = _fenced_after(readme, "**text** — one line per finding")
    assert command == "grist-lsp --check examples/vae.py"
    text = grist_cli(*command.split()[1:], cwd=REPO)
    assert text.returncode == 1, text.stderr  # confirmed bugs
    assert _FINDING.findall(text.stdout) == _FINDING.findall(shown)
    # The README shows a first run; a later one answers from the result cache and says so.
    summary = re.sub(r" \(\d+ from the cache\)", "", text.stdout.splitlines()[-1])
    assert summary == shown.splitlines()[-1]

    command, shown = _fenced_after(readme, "**json** (`--format json`)")
    assert command == "grist-lsp --check examples/vae.py --format json"
    data = json.loads(grist_cli(*command.split()[1:], cwd=REPO).stdout)
    stats = re.search(r'"stats": \{(.*?)\}', shown, re.S).group(1)  # type: ignore[union-attr]
    assert {k: int(re.search(rf'"{k}": (\d+)', stats).group(1)) for k in _COUNTS} == {  # type: ignore[union-attr]
        k: data["stats"][k] for k in _COUNTS
    }
    first = data["findings"][0]
    for key in ("file", "line", "column", "end_line", "end_column", "op", "kind", "status"):
        assert f'"{key}": {json.dumps(first[key])}' in shown, key
