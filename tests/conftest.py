"""Shared fixtures: run the real `grist-lsp` console script, write small projects, run the
reproducers it wrote in a fresh pytest process.

Kept small on purpose; fixtures used by one test file live in that file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# The checkout these tests belong to: the console script (and the engine's children) import its
# code, as an editable install of it does, whatever the runner's PYTHONPATH or another install says.
CHECKOUT = str(Path(__file__).resolve().parents[1])


def _console_script() -> str:
    # The script installed beside this interpreter is the one `pip install -e .` made.
    beside = Path(sys.executable).parent / "grist-lsp"
    if beside.is_file():
        return str(beside)
    found = shutil.which("grist-lsp")
    if found is None:
        raise RuntimeError(
            "the grist-lsp console script is not installed; run `pip install -e '.[dev]'` first"
        )
    return found


@pytest.fixture(scope="session")
def grist_script() -> str:
    """Path of the installed `grist-lsp` console script."""
    return _console_script()


@pytest.fixture
def grist_cli(grist_script: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `grist-lsp ARGS...` as a subprocess: `grist_cli("--check", ".", cwd=tmp_path)`."""
    script = grist_script

    def run(*args: str, cwd: Path | str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
        env["PYTHONPATH"] = CHECKOUT
        return subprocess.run(
            [script, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    return run


@pytest.fixture
def write_tree(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """Write `{relative path: text}` under tmp_path (folders created) and return tmp_path."""

    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return tmp_path

    return write


@pytest.fixture
def run_pytest() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run pytest on `target` (the reproducers a check wrote) in a fresh process: `run_pytest("repro", cwd=project)`."""

    def run(target: Path | str, cwd: Path | str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(target)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )

    return run
