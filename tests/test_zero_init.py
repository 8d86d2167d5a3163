"""The classic tutorials: zero-initialised weights, exact zeros behind an epsilon, and a discarded
branch's gradient reached from a test in another file (issue 28).

Each check runs the command line on a small program written the way tutorials write it and
judges what a user sees: the finding's line and status, the witness (from which training step
its state comes, how far its inputs went), and the reproducer run by pytest in a fresh process.
The command line is this checkout's (``python -m grist_lsp`` with it first on the path); the
training programs are the training bench's own (``bench/training/``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grist_lsp.model import counted

REPO = Path(__file__).resolve().parents[1]

PROGRAMS = REPO / "bench" / "training"  # the training bench's programs, labelled at their bug's line


def _labelled_line(text: str, label: str) -> int:
    [line] = [n for n, src in enumerate(text.splitlines(), 1) if f"# expect: {label}" in src]
    return line


SOFT_LOG = """\
import torch


def soft_log(x):
    return torch.where(x > 0, torch.log(x), torch.zeros_like(x))
"""
SOFT_LOG_TEST = """\
import torch

from ops import soft_log


def test_soft_log_backward():
    x = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
    soft_log(x).sum().backward()
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8"}


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _check(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    result = _run(
        cwd, "-m", "grist_lsp", "--check", *args, "--format", "json", "--write-reproducers", "repro"
    )
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads(result.stdout)["findings"]


def _reproducers_fail(cwd: Path) -> None:
    run = _run(cwd, "-m", "pytest", "-q", "-p", "no:cacheprovider", "repro")
    assert run.returncode == 1 and " failed" in run.stdout, run.stdout + run.stderr
    assert " error" not in run.stdout.splitlines()[-1], run.stdout


def test_a_zero_initialised_softmax_regression_is_confirmed_from_a_state_training_reached(tmp_path: Path):
    text = (PROGRAMS / "zero_softmax_784_sgd.py").read_text()
    (tmp_path / "train.py").write_text(text)
    result, findings = _check(tmp_path, "train.py")
    assert result.returncode == 1, result.stdout + result.stderr
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (_labelled_line(text, "confirmed log"), "confirmed"), log
    witness = log["witness"]
    # From which training step its state comes (W = 0 at step 0 has no input gradient at all),
    # and how far its inputs went from the program's own.
    assert isinstance(witness["steps"], int) and witness["steps"] >= 1, witness
    assert f"after {counted(witness['steps'], 'training step')}" in log["message"]
    assert witness["beyond_examples"] is not None and "the range the program used" in witness["input_scale"]
    _reproducers_fail(tmp_path)


def test_a_trained_gain_behind_an_epsilon_reaches_the_exact_float32_root(tmp_path: Path):
    text = (PROGRAMS / "gain_eps_div_trained.py").read_text()
    (tmp_path / "train.py").write_text(text)
    result, findings = _check(tmp_path, "train.py")
    [div] = [f for f in findings if f["kind"] == "div"]
    assert (div["line"], div["status"]) == (_labelled_line(text, "confirmed div"), "confirmed"), div
    _reproducers_fail(tmp_path)


def test_soft_log_reached_from_a_test_in_another_file_is_confirmed_through_its_gradient(tmp_path: Path):
    (tmp_path / "ops.py").write_text(SOFT_LOG)
    (tmp_path / "test_ops.py").write_text(SOFT_LOG_TEST)
    result, findings = _check(tmp_path, "ops.py")
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (5, "confirmed"), log
    assert log["witness"]["entry"].startswith("test:")
    assert "its gradient is nan in the backward pass" in log["message"]
    _reproducers_fail(tmp_path)


def test_a_zero_initialised_classifier_at_a_small_learning_rate_is_confirmed_within_its_data(
    tmp_path: Path,
):
    """W = 0 and lr 0.01: the inputs' gradient is exactly 0 at the first evaluation, and training
    alone takes the loss nowhere near NaN; the first search aims at an evaluation some steps in and
    takes the points ~100x past their range. The witness a maintainer believes keeps them within it
    and grows the weights instead, the way a run at a higher learning rate would (issue 37, item 6)."""
    text = (PROGRAMS / "zero_two_feature_sgd.py").read_text()
    (tmp_path / "train.py").write_text(text)
    result, findings = _check(tmp_path, "train.py")
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (_labelled_line(text, "confirmed log"), "confirmed"), log
    witness = log["witness"]
    assert witness["beyond_examples"] is not None and witness["beyond_examples"] <= 1, witness
    assert witness["weights_moved"].get("weights", 0) > 1, witness
    _reproducers_fail(tmp_path)


def test_a_zero_initialised_relu_network_is_confirmed_with_its_images_as_they_are(tmp_path: Path):
    """nn.init.zeros_ on a ReLU MLP: every hidden unit is the same, a ReLU at 0 passes no gradient
    back, and the program's own training only ever moves the output bias. The first search gives
    the zero weights a random start (as a random init would) and takes the images past their range;
    the witness a maintainer believes keeps the images as they are and moves what training moves,
    the output bias, and says how far (issue 37, item 6)."""
    text = (PROGRAMS / "zero_relu_mlp_sgd.py").read_text()
    (tmp_path / "train.py").write_text(text)
    result, findings = _check(tmp_path, "train.py")
    assert result.returncode == 1, result.stdout + result.stderr
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (_labelled_line(text, "confirmed log"), "confirmed"), log
    witness = log["witness"]
    assert witness["beyond_examples"] is not None and witness["beyond_examples"] <= 1, witness
    assert witness["weights_moved"].get("model.out.bias", 0) > 1, witness
    assert "model.out.bias by up to" in log["message"], log["message"]
    _reproducers_fail(tmp_path)
