"""The classic tutorials: zero-initialised weights, exact zeros behind an epsilon, and a discarded
branch's gradient reached from a test in another file (issue 28).

Each check runs the command line on a small program written the way tutorials write it and
judges what a user sees: the finding's line and status, the witness (from which training step
its state comes, how far its inputs went), and the reproducer run by pytest in a fresh process.
The command line is this checkout's (``python -m grist_lsp`` with it first on the path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Softmax regression as the tutorials write it: W = 0, so the inputs' gradient is exactly 0 at
# the first step; one optimizer step later it flows.
ZERO_SOFTMAX = """\
import torch

torch.manual_seed(0)
n = 300
x = torch.rand(n, 784)
y = torch.nn.functional.one_hot(torch.randint(0, 10, (n,)), 10).float()
W = torch.zeros(784, 10, requires_grad=True)
b = torch.zeros(10, requires_grad=True)
opt = torch.optim.SGD([W, b], lr=0.5)
for epoch in range(20):
    for i in range(n // 100):
        pred = torch.softmax(x[i * 100:(i + 1) * 100] @ W + b, dim=1)
        cost = torch.mean(-torch.sum(y[i * 100:(i + 1) * 100] * torch.log(pred), dim=1))
        opt.zero_grad()
        cost.backward()
        opt.step()
"""
ZERO_LOG_LINE = 13

# A gain trained by the program, behind an epsilon: in float32 the divisor is 0 only for the
# one value of the gain nearest -1e-07.
GAIN = """\
import torch

torch.manual_seed(0)
x = torch.rand(50, 4)
y = x.sum(1, keepdim=True)
gain = torch.ones(4, requires_grad=True)
w = torch.zeros(4, 1, requires_grad=True)
opt = torch.optim.SGD([gain, w], lr=0.01)
for epoch in range(100):
    z = x / (gain + 1e-07)
    loss = ((z @ w - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
GAIN_LINE = 10

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


def _check(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grist_lsp",
            "--check",
            *args,
            "--format",
            "json",
            "--write-reproducers",
            "repro",
        ],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads(result.stdout)["findings"]


def _reproducers_fail(cwd: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "repro"],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1 and " failed" in run.stdout, run.stdout + run.stderr
    assert " error" not in run.stdout.splitlines()[-1], run.stdout


def test_a_zero_initialised_softmax_regression_is_confirmed_from_a_state_training_reached(tmp_path: Path):
    (tmp_path / "train.py").write_text(ZERO_SOFTMAX)
    result, findings = _check(tmp_path, "train.py")
    assert result.returncode == 1, result.stdout + result.stderr
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (ZERO_LOG_LINE, "confirmed"), log
    witness = log["witness"]
    # From which training step its state comes (W = 0 at step 0 has no input gradient at all),
    # and how far its inputs went from the program's own.
    assert isinstance(witness["steps"], int) and witness["steps"] >= 1, witness
    assert f"after {witness['steps']} training steps" in log["message"]
    assert witness["beyond_examples"] is not None and "the range the program used" in witness["input_scale"]
    _reproducers_fail(tmp_path)


def test_a_trained_gain_behind_an_epsilon_reaches_the_exact_float32_root(tmp_path: Path):
    (tmp_path / "train.py").write_text(GAIN)
    result, findings = _check(tmp_path, "train.py")
    [div] = [f for f in findings if f["kind"] == "div"]
    assert (div["line"], div["status"]) == (GAIN_LINE, "confirmed"), div
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
