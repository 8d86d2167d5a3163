"""Usage errors the command line must say before (or instead of) a report.

A wrong `--entry` or `entries` value, a string where `[tool.grist]` documents a list, an `-o`
that cannot be written: each exits 2 with one `grist-lsp: error:` line naming the file, the key
or function, and what to write instead, and never falls back to reporting what a probe found.
Where the mistake is visible without running anything, no program of the user's runs at all:
the checked file writes a marker when imported (with `--no-sandbox`, so the write is real).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from grist_lsp.analyzer.programs import may_define
from grist_lsp.model import Status
from grist_lsp.server import core
from grist_lsp.server.settings import Settings

Cli = Callable[..., subprocess.CompletedProcess[str]]
Tree = Callable[[dict[str, str]], Path]

# Importing it (any worker run) leaves `imported.txt` beside it.
PROGRAM = """import pathlib

import torch

pathlib.Path(__file__).with_name("imported.txt").write_text("imported")


def loss(p):
    return torch.log(p).sum()


def make():
    return loss, (torch.rand(4) + 0.5,)


def bad():
    return 5


def broken():
    raise RuntimeError("no data here")
"""
BAD_LINE = 16  # the line of `def bad`
RAISE_LINE = 21  # the raise in `broken`


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    """The single error line of a usage error, after checking there is exactly one and no report."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("grist-lsp: error:")]
    assert len(errors) == 1, result.stderr
    assert result.stdout == ""
    return errors[0]


def _check(grist_cli: Cli, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return grist_cli("--check", "--no-sandbox", "--jobs", "1", "--budget", "1", *args, "model.py", cwd=root)


def test_an_entry_naming_no_function_of_the_file_exits_2_before_anything_runs(
    grist_cli: Cli, write_tree: Tree
) -> None:
    root = write_tree({"model.py": PROGRAM})
    error = _one_error(_check(grist_cli, root, "--entry", "model.py:nosuch"))
    assert f"--entry: entry 'model.py:nosuch': {root / 'model.py'} defines no function 'nosuch'" in error
    assert "returns (callable, args) or (callable, args, kwargs)" in error
    assert not (root / "imported.txt").exists()


def test_an_entry_returning_the_wrong_thing_exits_2_naming_its_line(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree({"model.py": PROGRAM})
    error = _one_error(_check(grist_cli, root, "--entry", "model.py:bad"))
    assert f"{root / 'model.py'}:{BAD_LINE}: entry bad() returned 5 (int)" in error
    assert "returns (callable, args) or (callable, args, kwargs)" in error


def test_a_wrong_entry_after_one_that_reaches_every_site_is_still_an_error(
    grist_cli: Cli, write_tree: Tree
) -> None:
    # `make` reaches the only site: the worker must still run `bad`, not skip it.
    root = write_tree({"model.py": PROGRAM})
    error = _one_error(_check(grist_cli, root, "--entry", "model.py:make", "--entry", "model.py:bad"))
    assert "entry bad() returned 5 (int)" in error


def test_an_entry_that_raises_is_an_error_finding_at_its_line_even_when_a_probe_reaches_the_site(
    grist_cli: Cli, write_tree: Tree
) -> None:
    """Not a usage error (the entry is the program's own code, and its bug), but never silent:
    the probe that reached the site instead does not hide that the named entry failed."""
    root = write_tree({"model.py": PROGRAM})
    result = _check(grist_cli, root, "--entry", "model.py:broken", "--format", "json")
    errors = [f for f in json.loads(result.stdout)["findings"] if f["status"] == "error"]
    assert [(f["line"], "RuntimeError: no data here" in f["message"]) for f in errors] == [(RAISE_LINE, True)]
    assert "entry:" in errors[0]["message"] and "model.py:broken" in errors[0]["message"]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ('["model.py:nosuch"]', "[tool.grist] `entries`: entry 'model.py:nosuch': "),
        ('"model.py:make"', "`entries` must be a list of strings, got the string 'model.py:make'"),
        ("[3]", "`entries` must be a list of strings"),
        ('["model.py:bad"]', f"model.py:{BAD_LINE}: entry bad() returned 5 (int)"),
    ],
)
def test_a_wrong_entries_value_in_the_config_exits_2(
    grist_cli: Cli, write_tree: Tree, entries: str, expected: str
) -> None:
    root = write_tree({"pyproject.toml": f"[tool.grist]\nentries = {entries}\n", "model.py": PROGRAM})
    error = _one_error(_check(grist_cli, root))
    assert expected in error
    if "returned" not in expected:
        assert str(root / "pyproject.toml") in error
        assert not (root / "imported.txt").exists()


def test_a_good_entry_is_used(grist_cli: Cli, write_tree: Tree) -> None:
    """The counterpart of the errors above: the same file and flags with `make` confirm the bug
    through that entry, so an exit 2 above is the entry's fault, not the program's."""
    root = write_tree({"model.py": PROGRAM})
    result = _check(grist_cli, root, "--entry", "model.py:make", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["status"] == "confirmed" and finding["witness"]["entry"].endswith("model.py:make")


@pytest.mark.parametrize("key", ["exclude", "extend-exclude", "include", "select", "ignore"])
def test_a_string_where_a_list_is_documented_exits_2_naming_the_key(
    grist_cli: Cli, write_tree: Tree, key: str
) -> None:
    value = "GRIST101" if key in ("select", "ignore") else "model.py"
    root = write_tree({"pyproject.toml": f'[tool.grist]\n{key} = "{value}"\n', "model.py": PROGRAM})
    error = _one_error(grist_cli("--check", "--static-only", ".", cwd=root))
    assert f"{root / 'pyproject.toml'}: [tool.grist] `{key}` must be a list of strings" in error
    assert f'write {key} = ["{value}"]' in error


def test_per_file_ignores_with_a_string_exits_2(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": '[tool.grist]\nper-file-ignores = {"model.py" = "GRIST101"}\n',
            "model.py": PROGRAM,
        }
    )
    error = _one_error(grist_cli("--check", "--static-only", ".", cwd=root))
    assert '`per-file-ignores` "model.py" must be a list of rule codes' in error
    assert 'write "model.py" = ["GRIST101"]' in error


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("missing/report.json", "the folder missing does not exist"),
        (".", "is a folder"),
    ],
)
def test_an_output_that_cannot_be_written_exits_2_before_any_worker_starts(
    grist_cli: Cli, write_tree: Tree, output: str, expected: str
) -> None:
    root = write_tree({"model.py": PROGRAM})
    error = _one_error(_check(grist_cli, root, "--entry", "model.py:make", "-o", output))
    assert f"--output {output}: {expected}" in error
    assert not (root / "imported.txt").exists()  # the dynamic run never started


def test_a_dangling_symlink_is_reported_under_its_own_path(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree({"model.py": PROGRAM})
    (root / "gone.py").symlink_to(root / "nowhere" / "zz.py")
    result = grist_cli("--check", "--static-only", "--format", "json", ".", cwd=root)
    errors = [f for f in json.loads(result.stdout)["findings"] if f["status"] == "error"]
    assert [(f["file"], f["line"]) for f in errors] == [("gone.py", 1)]
    text = grist_cli("--check", "--static-only", ".", cwd=root).stdout
    assert "gone.py:1:1: GRIST000 [error]" in text and "zz.py" not in text


@pytest.mark.parametrize(
    ("source", "name", "defined"),
    [
        ("def f():\n    pass\n", "f", True),
        ("def f():\n    pass\n", "g", False),
        ("from helpers import make\n", "make", True),
        ("import os.path\n", "os", True),
        ("make = lambda: None\n", "make", True),
        ("try:\n    def make():\n        pass\nexcept ImportError:\n    pass\n", "make", True),
        ("from helpers import *\n", "make", True),  # a star import: unknowable, the worker decides
        ("def __getattr__(name):\n    pass\n", "make", True),
        ("class A:\n    def make(self):\n        pass\n", "A.make", True),
        ("class A:\n    def make(self):\n        pass\n", "A.other", False),
        ("class A(Base):\n    pass\n", "A.make", True),  # a base class may give it
        ("def f(:\n", "f", True),  # unparsable: the worker's import says why
    ],
)
def test_may_define_is_false_only_when_the_source_surely_binds_no_such_name(
    source: str, name: str, defined: bool
) -> None:
    assert may_define(source, name) is defined


def test_in_the_editor_an_entry_returning_the_wrong_thing_is_an_error_on_the_file(write_tree: Tree) -> None:
    """The language server runs the same service: the wrong entry is said on the file (GRIST000)
    instead of diagnostics found through a probe."""
    root = write_tree({"pyproject.toml": '[tool.grist]\nentries = ["model.py:bad"]\n', "model.py": PROGRAM})
    path = str(root / "model.py")
    verdicts = core.confirm_file(path, PROGRAM, Settings(), str(root), None, threading.Event())
    errors = [v for v in verdicts if v.status is Status.ERROR]
    assert [e.message for e in errors] == [
        f"{path}:{BAD_LINE}: entry bad() returned 5 (int); an entry function takes no arguments "
        "and returns (callable, args) or (callable, args, kwargs)"
    ]
    assert all(v.status is not Status.CONFIRMED for v in verdicts)
