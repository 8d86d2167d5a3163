"""File discovery and `[tool.grist]` (which files a check sees, config errors that name the file), fix application."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from grist_lsp.config import ConfigError, find_pyproject, load_config
from grist_lsp.discovery import Discovery, PathNotFound, discover
from grist_lsp.edits import apply_fixes, unified_diff
from grist_lsp.model import Fix, Span, TextEdit

Tree = Callable[[dict[str, str]], Path]


def _names(found: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in found]


def test_walk_honours_gitignore_nested_and_negated(write_tree: Tree) -> None:
    root = write_tree(
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".gitignore": "generated/\n*_pb2.py\n",
            "a.py": "",
            "notes.txt": "",
            "generated/g.py": "",
            "proto/m_pb2.py": "",
            "pkg/.gitignore": "local_*.py\n!local_keep.py\n",
            "pkg/local_x.py": "",
            "pkg/local_keep.py": "",
            "pkg/b.py": "",
            ".venv/lib/site.py": "",
            "pkg/__pycache__/b.py": "",
        }
    )
    found = discover([str(root)], Discovery(root=root))
    assert _names(found, root) == ["a.py", "pkg/b.py", "pkg/local_keep.py"]


def test_config_exclude_and_include_are_relative_to_the_config(write_tree: Tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": '[tool.grist]\nexclude = ["tests/corpus", "/scripts/"]\ninclude = ["*.py", "*.pyw"]\n',
            "src/m.py": "",
            "src/gui.pyw": "",
            "tests/corpus/bug.py": "",
            "tests/test_m.py": "",
            "scripts/s.py": "",
            "src/scripts/keep.py": "",
        }
    )
    config = load_config(find_pyproject(root / "src"), root)
    assert config.root == root.resolve()
    found = discover([str(root)], Discovery(root=config.root, exclude=config.exclude, include=config.include))
    assert _names(found, root) == ["src/gui.pyw", "src/m.py", "src/scripts/keep.py", "tests/test_m.py"]


def test_explicit_files_are_checked_unless_force_exclude(write_tree: Tree) -> None:
    root = write_tree({"tests/corpus/bug.py": "", "ok.py": ""})
    discovery = Discovery(root=root, exclude=["tests/corpus"])
    named = [str(root / "tests/corpus/bug.py"), str(root / "ok.py")]
    assert _names(discover(named, discovery), root) == ["ok.py", "tests/corpus/bug.py"]
    discovery.force_exclude = True
    assert _names(discover(named, discovery), root) == ["ok.py"]
    # A named folder that is excluded is still walked, like ruff without --force-exclude.
    discovery.force_exclude = False
    assert _names(discover([str(root / "tests/corpus")], discovery), root) == ["tests/corpus/bug.py"]


def test_missing_path_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(PathNotFound, match="nope/x.py: no such file or directory"):
        discover(["nope/x.py"], Discovery(root=tmp_path))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('budget = "ten"', "`budget` must be a number >= 0, got 'ten'"),
        ('fail-on = "always"', "`fail-on` must be one of confirmed, possible, got 'always'"),
        ("include = [1]", "`include` must be a list of strings"),
        ('entries = ["train.py"]', "entry 'train.py' is not FILE:FUNCTION"),
        ("budgett = 3", "unknown key `budgett`"),
        ("jobs = 0", "`jobs` must be an integer >= 1, got 0"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path: Path, table: str, expected: str) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[tool.grist]\n{table}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(pyproject, tmp_path)
    assert str(info.value).startswith(str(pyproject) + ": ")
    assert expected in str(info.value)


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.grist\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(pyproject, tmp_path)


def test_nearest_pyproject_with_a_grist_table_wins(write_tree: Tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": "[tool.grist]\nbudget = 5\n",
            "sub/pyproject.toml": "[project]\nname = 'sub'\n",
            "sub/m.py": "",
        }
    )
    config = load_config(find_pyproject(root / "sub" / "m.py"), root)
    assert config.budget == 5.0 and config.source == root / "pyproject.toml"


def test_fixes_apply_by_code_points_and_skip_overlaps() -> None:
    text = "é = torch.log(p)\nq = a / b\n"
    clamp = Fix("clamp", [TextEdit(Span(1, 14, 1, 15), "p.clamp_min(1e-8)")], verified=True)
    overlapping = Fix("other", [TextEdit(Span(1, 4, 1, 16), "torch.log_softmax(p)")], verified=True)
    guard = Fix("guard", [TextEdit(Span(2, 8, 2, 9), "b.clamp_min(1e-8)")], verified=True)
    result = apply_fixes(text, [clamp, overlapping, guard])
    assert result.text == "é = torch.log(p.clamp_min(1e-8))\nq = a / b.clamp_min(1e-8)\n"
    assert result.applied == [clamp, guard] and result.skipped == [overlapping]
    diff = unified_diff("m.py", text, result.text)
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "+é = torch.log(p.clamp_min(1e-8))\n" in diff


def test_diff_shows_and_fix_writes_only_verified_fixes(tmp_path: Path) -> None:
    from grist_lsp.check import CheckOptions, Report, _apply_verified
    from grist_lsp.model import Site, Status, Verdict

    path = tmp_path / "m.py"
    text = "import torch\ny = torch.log(x)\nz = a / b\n"
    path.write_text(text, encoding="utf-8")

    def verdicts() -> list[Verdict]:
        log = Site(str(path), Span(2, 4, 2, 16), "torch.log", "log", "input", "torch.log(x)")
        div = Site(str(path), Span(3, 4, 3, 9), "torch.Tensor.__truediv__", "div", "other", "a / b")
        return [
            Verdict(
                log,
                Status.CONFIRMED,
                fixes=[Fix("clamp", [TextEdit(Span(2, 14, 2, 15), "x.clamp_min(1e-8)")], verified=True)],
            ),
            Verdict(div, Status.POSSIBLE, fixes=[Fix("guard", [TextEdit(Span(3, 8, 3, 9), "(b + 1e-8)")])]),
        ]

    shown = Report(verdicts=[], stats={})
    per_file = {path: verdicts()}
    _apply_verified(per_file, {path: text}, CheckOptions(diff=True), shown)
    assert path.read_text(encoding="utf-8") == text  # --diff writes nothing
    assert "-y = torch.log(x)\n+y = torch.log(x.clamp_min(1e-8))\n" in shown.diffs[str(path)]
    assert "(b + 1e-8)" not in shown.diffs[str(path)]  # the unverified guard is not applied
    assert len(per_file[path]) == 2 and shown.fixed == []

    written = Report(verdicts=[], stats={})
    per_file = {path: verdicts()}
    _apply_verified(per_file, {path: text}, CheckOptions(fix=True), written)
    assert path.read_text(encoding="utf-8") == "import torch\ny = torch.log(x.clamp_min(1e-8))\nz = a / b\n"
    assert [v.site.op for v in written.fixed] == ["torch.log"]
    assert [v.site.op for v in per_file[path]] == ["torch.Tensor.__truediv__"]  # what is left is reported
