"""fix_verdicts end to end: the real static pass and engine confirm a bug, each proposed fix is
re-checked (static pass, fresh engine search, witness replay, output comparison), and only a fix
that removes the bug without changing the program's output is marked verified."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.dynamic.engine import confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.dynamic.reproducer import write_reproducer
from grist_lsp.dynamic.verify import apply_edits, check_fix, fix_verdicts
from grist_lsp.model import Fix, Status, TextEdit, Verdict

CORPUS = Path(__file__).parent / "corpus" / "fixes"


@dataclasses.dataclass
class Confirmed:
    path: Path
    text: str
    verdicts: list[Verdict]
    options: EngineOptions

    @property
    def bug(self) -> Verdict:
        return next(v for v in self.verdicts if v.status is Status.CONFIRMED)


@pytest.fixture(scope="module")
def norm(tmp_path_factory: pytest.TempPathFactory) -> Confirmed:
    """backward_norm.py (sqrt of a sum of squares) with its sqrt confirmed by the engine."""
    folder = tmp_path_factory.mktemp("verify")
    path = folder / "norm_verify.py"
    shutil.copy(CORPUS / "backward_norm.py", path)
    text = path.read_text()
    options = EngineOptions(budget=1.0, seed=0, entries=[f"{path}:make"], project_root=str(folder))
    verdicts = confirm(str(path), text, analyze_source(str(path), text), options)
    assert [v.status for v in verdicts] == [Status.CONFIRMED], [(v.status, v.reason) for v in verdicts]
    return Confirmed(path, text, verdicts, options)


# clamping at 0 keeps sqrt's infinite gradient at 0: the witness still replays
WEAK = "torch.sqrt((v * v).sum(dim=-1).clamp_min(0.0))"
# removes the bug, but also changes every norm below 10
HEAVY = "torch.sqrt((v * v).sum(dim=-1).clamp_min(100.0))"


@pytest.fixture(scope="module")
def checked(norm: Confirmed) -> dict[str, object]:
    """The proposed fixes and two hand-written ones, re-checked at the same time (each check is
    subprocesses, so threads overlap them)."""
    site = norm.bug.site
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        proposed = pool.submit(fix_verdicts, str(norm.path), norm.text, norm.verdicts, norm.options)
        others = {
            name: pool.submit(
                check_fix,
                str(norm.path),
                norm.text,
                norm.bug,
                Fix(name, [TextEdit(site.span, code)]),
                norm.verdicts,
                norm.options,
            )
            for name, code in (("weak", WEAK), ("heavy", HEAVY))
        }
        return {"proposed": proposed.result(), **{k: f.result() for k, f in others.items()}}


@pytest.fixture(scope="module")
def fixed(checked: dict[str, object]) -> list[Verdict]:
    return checked["proposed"]  # type: ignore[return-value]


def test_the_proposed_fix_is_verified_and_says_what_was_checked(
    norm: Confirmed, fixed: list[Verdict]
) -> None:
    [verdict] = fixed
    assert verdict.status is Status.CONFIRMED and verdict.witness is not None
    [fix] = verdict.fixes
    assert fix.title == "Clamp the operand of torch.sqrt to >= 1e-8"
    assert apply_edits(norm.text, fix.edits).count("torch.sqrt((v * v).sum(dim=-1).clamp_min(1e-8))") == 1
    assert fix.verified, fix.note
    for words in (
        "static pass",
        "engine (fresh search, same seed): the site is not confirmed",
        "no new confirmed site",
        "original witness replayed on the fixed code: not reproduced",
        "program output on its example inputs unchanged",
    ):
        assert words in fix.note


def test_a_fix_that_leaves_the_bug_is_not_verified(checked: dict) -> None:
    checked = checked["weak"]
    assert not checked.verified
    assert "original witness replayed on the fixed code: reproduced" in checked.note


def test_a_fix_that_changes_the_output_is_not_verified(checked: dict) -> None:
    checked = checked["heavy"]
    assert not checked.verified
    assert "original witness replayed on the fixed code: not reproduced" in checked.note
    assert "program output on its example inputs: differs" in checked.note


def test_a_fix_that_does_not_parse_is_not_verified(norm: Confirmed) -> None:
    broken = Fix("Broken", [TextEdit(norm.bug.site.span, "torch.sqrt((v * v).sum(dim=-1)")])
    checked = check_fix(str(norm.path), norm.text, norm.bug, broken, norm.verdicts, norm.options)
    assert not checked.verified and "does not parse" in checked.note


def test_possible_sites_get_unverified_fixes_without_running_anything() -> None:
    path = CORPUS / "kinds.py"
    text = path.read_text()
    verdicts = [v for v in analyze_source(str(path), text) if v.site.function == "log_plain"]
    assert [v.status for v in verdicts] == [Status.POSSIBLE]
    [verdict] = fix_verdicts(str(path), text, verdicts, EngineOptions(budget=1.0))
    [fix] = verdict.fixes
    assert not fix.verified
    assert fix.note == "not verified (no witness to re-run): static pass: the site is now proved safe"


def test_engine_witness_reproducer_fails_then_passes_after_the_verified_fix(
    norm: Confirmed, fixed: list[Verdict], tmp_path: Path
) -> None:
    """The full loop a user sees: confirmed bug -> reproducer fails -> apply the verified fix -> passes."""
    program = tmp_path / "norm_loop.py"
    program.write_text(norm.text)
    verdict = fixed[0]
    site = dataclasses.replace(verdict.site, file=str(program))
    witness = dataclasses.replace(verdict.witness, entry=f"entry:{program}:make")
    repro = write_reproducer(site, witness, str(tmp_path / "repro"))

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", repro],
            capture_output=True,
            text=True,
            cwd=str(tmp_path),
            timeout=300,
        )

    before = run()
    assert before.returncode == 1, before.stdout + before.stderr
    program.write_text(apply_edits(norm.text, verdict.fixes[0].edits))
    after = run()
    assert after.returncode == 0, after.stdout + after.stderr


def test_script_fixes_are_compared_on_what_the_script_prints(tmp_path: Path) -> None:
    """A script returns nothing: the numbers it prints are its output. Clamping log's operand
    keeps the printed entropy; a clamp that changes every p changes it and is not verified."""
    path = tmp_path / "entropy_verify.py"
    shutil.copy(CORPUS / "script_entropy.py", path)
    text = path.read_text()
    options = EngineOptions(budget=1.0, seed=0, project_root=str(tmp_path))
    verdicts = confirm(str(path), text, analyze_source(str(path), text), options)
    log = [v for v in verdicts if v.status is Status.CONFIRMED and v.site.text == "torch.log(p)"]
    assert log, [(v.status, v.site.text, v.reason) for v in verdicts]
    [verdict] = log
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        proposed = pool.submit(fix_verdicts, str(path), text, [verdict], options)
        heavy = pool.submit(
            check_fix,
            str(path),
            text,
            verdict,
            Fix("Clamp at 0.5", [TextEdit(verdict.site.span, "torch.log(p.clamp_min(0.5))")]),
            [verdict],
            options,
        )
        [fixed] = proposed.result()
        heavy_fix = heavy.result()
    fix = fixed.fixes[0]
    assert fix.title == "Clamp the operand of torch.log to >= 1e-8"
    assert fix.verified, fix.note
    assert "numbers the program prints on its example inputs unchanged" in fix.note
    assert not heavy_fix.verified
    assert "printed number 1 was" in heavy_fix.note
