"""Suppressions as a user writes them: `# grist: ignore[...]` comments and `[tool.grist]` rule selection.

Most checks run the real CLI with `--static-only` (the engine is not what is tested);
one checks that the engine is never handed a silenced site.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grist_lsp.check import CheckOptions, check_paths
from grist_lsp.model import Status, Verdict
from grist_lsp.suppressions import find_suppressions

# Two divisions on neighbouring lines; only the first carries a suppression.
BOXES = """import torch


def aspect(w: torch.Tensor, h: torch.Tensor):
    ratio = w / h  # grist: ignore[GRIST105] -- heights are >= 1 by construction
    inverse = h / w
    return ratio, inverse
"""


def _findings(result) -> list[dict]:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)["findings"]


def _where(findings: list[dict]) -> list[tuple[str, int, str]]:
    return [(f["file"], f["line"], f["kind"]) for f in findings]


def test_comment_silences_its_line_and_not_the_next(grist_cli, write_tree) -> None:
    root = write_tree({"boxes.py": BOXES})
    result = grist_cli("--check", "boxes.py", "--static-only", "--format", "json", cwd=root)
    assert _where(_findings(result)) == [("boxes.py", 6, "div")]
    assert json.loads(result.stdout)["stats"]["suppressed"] == 1

    text = grist_cli("--check", "boxes.py", "--static-only", cwd=root).stdout
    assert "boxes.py:6:15: GRIST105 [possible]" in text and "boxes.py:5:" not in text
    assert "1 suppressed" in text.splitlines()[-1]


def test_the_same_through_the_shared_orchestration(write_tree) -> None:
    root = write_tree({"boxes.py": BOXES})
    report = check_paths([str(root / "boxes.py")], CheckOptions(static_only=True))
    assert [
        (v.site.span.start_line, v.site.kind) for v in report.verdicts if v.status is Status.POSSIBLE
    ] == [(6, "div")]


def test_forms_of_the_comment(grist_cli, write_tree) -> None:
    source = """import torch


def f(x, y):
    a = torch.log(x)  # grist: ignore
    b = torch.log(x)  # grist: ignore[GRIST105]
    c = torch.log(x) / y  # grist: ignore[GRIST105,GRIST101]
    d = torch.sqrt(x)  # noqa: E501  # grist: ignore[GRIST103]
    s = "torch.log(x)  # grist: ignore"; e = torch.log(y)
    g = torch.log(
        x + y
    )  # grist: ignore[GRIST101]
    return a, b, c, d, s, e, g
"""
    root = write_tree({"forms.py": source})
    found = _where(_findings(grist_cli("--check", "forms.py", "--static-only", "--format", "json", cwd=root)))
    # Line 6 names another rule; line 9's "comment" is inside a string.
    assert found == [("forms.py", 6, "log"), ("forms.py", 9, "log")]


def test_comment_parsing_uses_tokens_not_text() -> None:
    source = 'x = "# grist: ignore"\ny = 1  # grist: ignore[grist105 , GRIST101] -- reason here\n# grist: ignored\n'
    (only,) = find_suppressions(source)
    assert (only.line, only.codes, only.reason) == (2, frozenset({"GRIST105", "GRIST101"}), "reason here")


def _project(write_tree, table: str, files: dict[str, str]) -> Path:
    return write_tree({"pyproject.toml": f"[tool.grist]\n{table}\n", **files})


LOG_AND_DIV = "import torch\n\n\ndef f(x, y):\n    return torch.log(x) / y\n"


def test_per_file_ignores(grist_cli, write_tree) -> None:
    root = _project(
        write_tree,
        'per-file-ignores = {"tests/*" = ["GRIST105"], "gen_*.py" = ["GRIST101"]}',
        {"tests/test_a.py": LOG_AND_DIV, "pkg/gen_b.py": LOG_AND_DIV, "pkg/c.py": LOG_AND_DIV},
    )
    found = _where(_findings(grist_cli("--check", ".", "--static-only", "--format", "json", cwd=root)))
    assert sorted(found) == [
        ("pkg/c.py", 5, "div"),
        ("pkg/c.py", 5, "log"),
        ("pkg/gen_b.py", 5, "div"),
        ("tests/test_a.py", 5, "log"),
    ]


@pytest.mark.parametrize(
    ("table", "kinds"),
    [
        ('select = ["GRIST101"]', ["log"]),
        ('ignore = ["GRIST101"]', ["div"]),
        ('select = ["GRIST101", "GRIST105"]\nignore = ["grist105"]', ["log"]),
    ],
)
def test_select_and_ignore(grist_cli, write_tree, table: str, kinds: list[str]) -> None:
    root = _project(write_tree, table, {"m.py": LOG_AND_DIV})
    found = _findings(grist_cli("--check", ".", "--static-only", "--format", "json", cwd=root))
    assert [f["kind"] for f in found] == kinds


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('select = ["GRIST999"]', "`select`"),
        ('ignore = ["E501"]', "`ignore`"),
        ('per-file-ignores = {"tests/*" = ["GRIST1O5"]}', '`per-file-ignores` "tests/*"'),
    ],
)
def test_unknown_rule_code_is_a_usage_error(grist_cli, write_tree, table: str, key: str) -> None:
    root = _project(write_tree, table, {"m.py": LOG_AND_DIV})
    result = grist_cli("--check", ".", "--static-only", cwd=root)
    assert result.returncode == 2
    assert "pyproject.toml" in result.stderr and key in result.stderr and "unknown rule code" in result.stderr


def test_unused_suppressions_only_with_the_flag(grist_cli, write_tree) -> None:
    source = BOXES.replace("inverse = h / w", "inverse = h / w  # grist: ignore[GRIST101]")
    source = source.replace("return ratio, inverse", "return ratio, inverse  # grist: ignore")
    root = write_tree({"boxes.py": source})
    plain = grist_cli("--check", "boxes.py", "--static-only", cwd=root)
    assert "GRIST001" not in plain.stdout and "unused" not in plain.stdout

    shown = grist_cli("--check", "boxes.py", "--static-only", "--show-unused-suppressions", cwd=root)
    unused = [line for line in shown.stdout.splitlines() if "GRIST001" in line]
    assert [line.split(": GRIST001")[0] for line in unused] == ["boxes.py:6:22", "boxes.py:7:28"]
    assert all("matched no finding" in line for line in unused)
    assert shown.returncode == plain.returncode == 0  # reported, never failing on its own

    data = json.loads(
        grist_cli(
            "--check", "boxes.py", "--static-only", "--show-unused-suppressions", "--format", "json", cwd=root
        ).stdout
    )
    assert [(u["line"], u["code"]) for u in data["unused_suppressions"]] == [(6, "GRIST001"), (7, "GRIST001")]
    sarif = json.loads(
        grist_cli(
            "--check",
            "boxes.py",
            "--static-only",
            "--show-unused-suppressions",
            "--format",
            "sarif",
            cwd=root,
        ).stdout
    )
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]].count("GRIST001") == 2


def test_the_engine_is_never_given_a_silenced_site(write_tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """Suppressed sites leave before the engine: it cannot spend search time on them."""
    from grist_lsp.dynamic import engine, verify

    handed: list[list[Verdict]] = []

    def confirm(
        path: str,
        text: str,
        verdicts: list[Verdict],
        options: object,
        progress=None,
        cancel=None,
        warm=None,
        on_confirmed=None,
        spares=None,
    ):
        handed.append(list(verdicts))
        return verdicts  # record what the engine would search; run nothing

    monkeypatch.setattr(engine, "confirm", confirm)
    monkeypatch.setattr(
        verify, "fix_verdicts", lambda path, text, verdicts, options, shared=None, only=None: verdicts
    )

    root = write_tree(
        {"boxes.py": BOXES, "quiet.py": "import torch\ny = torch.log(torch.rand(3))  # grist: ignore\n"}
    )
    check_paths([str(root)], CheckOptions(jobs=1))
    assert [[(v.site.span.start_line, v.status) for v in vs] for vs in handed] == [[(6, Status.POSSIBLE)]]
