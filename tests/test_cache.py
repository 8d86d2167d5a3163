"""The result cache (``grist_lsp/cache.py``): a second check of an unchanged project runs nothing.

The command-line tests share one small project and its cache (one cold check, module scope);
each test that changes a file, an option or an entry puts it back. A check runs in a
subprocess that reports, besides its JSON, whether it imported torch or the engine: every
child that runs user code is started through ``dynamic/engine.py``, so a check that never
imported it started no worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.cache import ResultCache, ResultOptions
from grist_lsp.model import NOT_REPLAYED, Status, Verdict, file_error
from grist_lsp.service import CheckOptions, Service
from tests.conftest import CHECKOUT
from tests.test_server import CONFIG, open_file, published_for, start, status, wait_for

HELPERS = "def shift(x):\n    return x - 1.0\n"
MODEL = """import torch

from helpers import shift

x = shift(torch.ones(4))
y = torch.log(x)
print(float(y.sum()))
"""
LOG_LINE = 6  # 1-based: `y = torch.log(x)`
PYPROJECT = "[tool.grist]\nbudget = 1\n"  # read by the CLI and the server alike

# Runs the command line in this process and says on stderr's last line what it imported.
PROBE = """
import json, sys
from grist_lsp.cli import main
code = main(sys.argv[1:])
imported = {name: name in sys.modules for name in ("torch", "grist_lsp.dynamic.engine")}
print(json.dumps(imported), file=sys.stderr)
sys.exit(code)
"""


@dataclasses.dataclass
class Checked:
    code: int
    report: dict[str, Any]
    imported: dict[str, bool]
    stderr: str
    stored: list[Path] = dataclasses.field(default_factory=list)  # the cache's entries right after it

    @property
    def findings(self) -> list[dict[str, Any]]:
        """The findings without the times a witness took (they vary from run to run)."""
        out = []
        for finding in self.report["findings"]:
            finding = json.loads(json.dumps(finding))
            if finding["witness"]:
                finding["witness"].pop("seconds")
            out.append(finding)
        return out


def check(project: Path, *args: str) -> Checked:
    env = {**os.environ, "PYTHONPATH": CHECKOUT, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "--check", ".", "--format", "json", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    *said, last = proc.stderr.strip().splitlines()
    return Checked(proc.returncode, json.loads(proc.stdout), json.loads(last), "\n".join(said))


def write_project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("pyproject.toml", PYPROJECT), ("helpers.py", HELPERS), ("model.py", MODEL)):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def entries(project: Path) -> list[Path]:
    return sorted((project / ".grist_cache").glob("*/*.json"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("cached") / "proj")


@pytest.fixture(scope="module")
def cold(project: Path) -> Checked:
    """The first check of the project: it searches, and stores what it found."""
    first = check(project)
    first.stored = entries(project)
    return first


def test_cold_check_confirms_the_bug_and_stores_it(project: Path, cold: Checked) -> None:
    (log,) = [f for f in cold.report["findings"] if f["kind"] == "log"]
    assert (log["file"], log["line"], log["status"]) == ("model.py", LOG_LINE, "confirmed")
    assert any(f["verified"] for f in log["fixes"])
    assert cold.report["stats"]["cached"] == 0 and cold.imported["grist_lsp.dynamic.engine"]
    assert (project / ".grist_cache" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    assert len(cold.stored) == 1


def test_warm_check_reports_the_same_and_starts_nothing(project: Path, cold: Checked) -> None:
    warm = check(project)
    assert warm.report["stats"]["cached"] == 1
    assert warm.findings == cold.findings  # witness, message and verified fixes alike
    assert warm.code == cold.code == 1
    assert warm.imported == {"torch": False, "grist_lsp.dynamic.engine": False}

    text = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", "."],
        cwd=project,
        env={**os.environ, "PYTHONPATH": CHECKOUT},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Found 1 confirmed in 2 files (1 from the cache)" in text.stdout.splitlines()[-1]


def test_a_changed_imported_module_runs_again(project: Path, cold: Checked) -> None:
    helpers = project / "helpers.py"
    try:
        helpers.write_text(HELPERS + "# edited\n", encoding="utf-8")
        edited = check(project)
        assert edited.report["stats"]["cached"] == 0 and edited.imported["grist_lsp.dynamic.engine"]
        assert edited.findings == cold.findings
    finally:
        helpers.write_text(HELPERS, encoding="utf-8")
    # The key is the bytes, not the time of the edit: the first answer is good again.
    assert check(project).report["stats"]["cached"] == 1


def test_a_changed_option_runs_again(project: Path, cold: Checked) -> None:
    reseeded = check(project, "--seed", "1")
    assert reseeded.report["stats"]["cached"] == 0 and reseeded.imported["grist_lsp.dynamic.engine"]
    assert [(f["line"], f["status"]) for f in reseeded.findings] == [
        (f["line"], f["status"]) for f in cold.findings
    ]


def test_a_corrupt_entry_is_ignored_and_rewritten(project: Path, cold: Checked) -> None:
    (entry,) = cold.stored
    entry.write_text('{"format": 1, "key": "cut sh', encoding="utf-8")  # a check killed mid-write
    rerun = check(project)
    assert rerun.report["stats"]["cached"] == 0 and rerun.findings == cold.findings
    assert json.loads(entry.read_text(encoding="utf-8"))["key"] == entry.stem
    assert check(project).report["stats"]["cached"] == 1


def test_no_cache_reads_and_writes_nothing(project: Path, cold: Checked) -> None:
    before = {p: p.stat().st_mtime_ns for p in (project / ".grist_cache").rglob("*")}
    uncached = check(project, "--no-cache")
    assert uncached.report["stats"]["cached"] == 0 and uncached.findings == cold.findings
    assert {p: p.stat().st_mtime_ns for p in (project / ".grist_cache").rglob("*")} == before

    fresh = write_project(project.parent / "never_cached")
    check(fresh, "--no-cache", "--static-only")
    assert sorted(p.name for p in fresh.iterdir()) == ["helpers.py", "model.py", "pyproject.toml"]


def test_two_checks_at_once_share_one_cache(tmp_path: Path) -> None:
    shared = write_project(tmp_path / "shared")
    env = {**os.environ, "PYTHONPATH": CHECKOUT}
    argv = [sys.executable, "-m", "grist_lsp", "--check", ".", "--format", "json", "-j", "1"]
    procs = [
        subprocess.Popen(argv, cwd=shared, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], [err[-2000:] for _, err in outs]
    first, second = (json.loads(out)["findings"] for out, _ in outs)
    assert [(f["line"], f["status"]) for f in first] == [(f["line"], f["status"]) for f in second]
    # Whole entries only, no temporary file left behind, and the next check uses them.
    assert not [p for p in (shared / ".grist_cache").rglob("*.tmp")]
    assert all(json.loads(e.read_text(encoding="utf-8"))["key"] == e.stem for e in entries(shared))
    assert check(shared).report["stats"]["cached"] == 1


# --- the key, field by field (no check runs) -------------------------------------


def _options(root: Path, **changes: Any) -> ResultOptions:
    base = ResultOptions(
        budget=1.0,
        seed=0,
        entries=[],
        script_args={},
        project_root=str(root),
        timeout=30.0,
        memory_mb=4096,
        write_reproducers=None,
        sandbox="auto",
        max_input_scale=None,
    )
    return dataclasses.replace(base, **changes)


def test_the_key_holds_every_option_and_only_the_files_that_reach_the_module(tmp_path: Path) -> None:
    root = write_project(tmp_path / "keys")
    (root / "entry.py").write_text("def make():\n    return None\n", encoding="utf-8")
    model = str(root / "model.py")
    static = analyze_source(model, MODEL)

    def key(**changes: Any) -> str:
        return ResultCache(root / ".grist_cache", root, _options(root, **changes)).key(model, MODEL, static)

    base = key()
    changed = {
        "budget": 2.0,
        "seed": 1,
        "entries": [f"{root / 'entry.py'}:make"],
        "script_args": {model: ["--fast"]},
        "project_root": str(tmp_path),
        "timeout": 5.0,
        "memory_mb": 1024,
        "write_reproducers": str(tmp_path / "repro"),
        "sandbox": "off",
        "max_input_scale": 2.0,
    }
    assert set(changed) == {f.name for f in dataclasses.fields(ResultOptions)}
    for name, value in changed.items():
        assert key(**{name: value}) != base, name

    # A file nothing here imports or runs does not count, nor does a library module that imports
    # this one (the engine never enters it through that); a test that imports it does, and so
    # does what that test imports.
    (root / "unrelated.py").write_text("X = 1\n", encoding="utf-8")
    (root / "library.py").write_text("import model\n\n\ndef f():\n    return model\n", encoding="utf-8")
    assert key() == base
    (root / "test_model.py").write_text("import model\nimport fixtures\n", encoding="utf-8")
    with_test = key()
    assert with_test != base
    (root / "fixtures.py").write_text("Y = 2\n", encoding="utf-8")
    assert key() != with_test
    # The static verdicts the engine is given (a suppression comment drops one) are part of it.
    cache = ResultCache(root / ".grist_cache", root, _options(root))
    assert cache.key(model, MODEL, static[:0]) != cache.key(model, MODEL, static)
    assert not (root / ".grist_cache").exists()  # computing keys writes nothing


# --- the language server -----------------------------------------------------------


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_server_shows_a_cached_confirmation_on_open_without_running_anything(
    client: LanguageClient, project: Path, cold: Checked
) -> None:
    # `cold` is the CI run before the editor opens the project.
    await start(client, project)
    uri = open_file(client, project / "model.py", MODEL)

    def confirmed() -> bool:
        shown = published_for(client, uri, 1) or []
        return any(
            d.range.start.line == LOG_LINE - 1 and d.severity == types.DiagnosticSeverity.Error for d in shown
        )

    await wait_for(client, confirmed, "the cached confirmation of the log")
    (bug,) = [d for d in published_for(client, uri, 1) or [] if d.range.start.line == LOG_LINE - 1]
    verdict = (bug.data or {})["verdict"]
    assert verdict["witness"]["replayed"] is True
    assert any(f["verified"] for f in verdict["fixes"])
    state = await status(client)
    assert state["engine_runs"] == 0 and state["cache_hits"] == 1


def test_an_answer_a_busy_machine_may_have_spoiled_is_not_stored(tmp_path: Path) -> None:
    """A file the engine could not run, or whose witness did not replay (a replay that timed
    out), is checked again next time: what got in the way is not in the key."""
    root = write_project(tmp_path / "spoiled")
    service = Service.resolve([str(root / "model.py")], CheckOptions())
    model = str(root / "model.py")
    static = analyze_source(model, MODEL)
    key = service.cache_key(model, MODEL, static)
    (site,) = [v.site for v in static if v.site.kind == "log"]
    unreplayed = Verdict(
        site, Status.POSSIBLE, reason=f"dynamic: a witness was found but {NOT_REPLAYED}: timed out"
    )
    for answer in ([unreplayed], [file_error(model, "timed out", error_kind="timeout")]):
        assert service.remember(key, model, answer, []) is None
        assert service.cached(key) is None
    assert service.remember(key, model, static, []) is None
    assert service.cached(key) is not None and (root / ".grist_cache" / ".gitignore").is_file()
