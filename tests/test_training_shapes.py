"""Issue 23's shapes of training programs, as a user checks them: the finding's line and status,
the witness, and its reproducer failing under pytest in a fresh process.

The programs are the training bench's own (``bench/training/``), so the bench and these tests
judge the same files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "training"


def _project(tmp_path: Path, name: str) -> Path:
    source = BENCH / name
    if source.is_dir():
        shutil.copytree(source, tmp_path / name)
        return tmp_path / name
    shutil.copy(source, tmp_path / name)
    return tmp_path


def _check(grist_cli, cwd: Path, *args: str) -> list[dict]:
    result = grist_cli("--check", *args, "--format", "json", cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)["findings"]


def _reproducers_fail(folder: Path, cwd: Path, count: int) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1 and f"{count} failed" in run.stdout, run.stdout + run.stderr
    assert " error" not in run.stdout.splitlines()[-1], run.stdout


def _at(findings: list[dict], kind: str) -> list[tuple[int, str]]:
    return sorted((f["line"], f["status"]) for f in findings if f["kind"] == kind)


def test_free_logits_rewrapped_by_variable_go_as_far_as_the_softmax_needs_and_say_how_far(
    grist_cli, tmp_path: Path
):
    """softmax underflows at a logit gap of ~104 in float32; z starts in [0, 1)."""
    name = "free_logits_variable_loop.py"
    cwd = _project(tmp_path, name)
    findings = _check(grist_cli, cwd, name, "--write-reproducers", "repro")
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (19, "confirmed"), log
    # How far the free logits went is the witness's realism figure...
    assert log["witness"]["beyond_examples"] > 10, log["witness"]
    _reproducers_fail(cwd / "repro", cwd, 1)
    # ...so a strict user's max-input-scale turns it down.
    strict = _check(grist_cli, cwd, name, "--max-input-scale", "10")
    [log] = [f for f in strict if f["kind"] == "log"]
    assert log["status"] == "possible" and "max-input-scale" in log["reason"], log


def test_an_endless_evaluation_loop_without_backward_is_checked_without_running_out(
    grist_cli, tmp_path: Path
):
    """A numpy batch each iteration, no backward; a second log waits for the NaN. What the engine
    keeps per iteration is bounded, so the check neither runs out of memory nor of time."""
    name = "eval_numpy_no_backward.py"
    cwd = _project(tmp_path, name)
    findings = _check(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert not [f for f in findings if f["status"] == "error"], findings
    assert _at(findings, "log")[0] == (14, "confirmed"), findings
    _reproducers_fail(cwd / "repro", cwd, 1)


def test_manual_training_by_rebinding_replays_in_a_fresh_process(grist_cli, tmp_path: Path):
    """W = W - lr * W.grad under no_grad, W.requires_grad_(True) each step: the weights of the
    failing step are new tensors, and the witness still puts them back."""
    name = "manual_rebind_logreg.py"
    cwd = _project(tmp_path, name)
    findings = _check(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, "log") == [(17, "confirmed"), (17, "confirmed")], findings
    assert not any("did not replay" in (f["reason"] or "") for f in findings), findings
    _reproducers_fail(cwd / "repro", cwd, 2)


@pytest.mark.parametrize("checked", ["pkg/losses/some_loss.py", "tests/test_losses.py", "."])
def test_a_library_loss_is_checked_through_the_test_that_calls_it(grist_cli, tmp_path: Path, checked: str):
    """The test imports the loss through its package (``from pkg.losses import ...``): checking
    the loss file, the test file or the project root reports it at the loss's own line."""
    cwd = _project(tmp_path, "losses_project")
    findings = _check(grist_cli, cwd, checked)
    [sqrt] = [f for f in findings if f["kind"] == "sqrt" and f["status"] != "safe"]
    assert Path(sqrt["file"]).as_posix().endswith("pkg/losses/some_loss.py"), sqrt
    assert (sqrt["line"], sqrt["status"]) == (7, "confirmed"), sqrt
    assert sqrt["witness"]["entry"].startswith("test:"), sqrt["witness"]


def test_a_site_shadowed_by_an_upstream_one_is_searched_with_the_upstream_kept_valid(
    grist_cli, tmp_path: Path
):
    """All-padding rows make the log_softmax NaN; a partly padded row breaks exp(logp) * logp."""
    name = "shadowed_padded_entropy.py"
    cwd = _project(tmp_path, name)
    findings = _check(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, "softmax") == [(8, "confirmed")], findings
    assert _at(findings, "inf_arith") == [(9, "confirmed")], findings
    _reproducers_fail(cwd / "repro", cwd, 2)
