"""Programs written for a GPU, checked on a machine without one.

``.cuda()``, ``device="cuda"`` and ``.to("cuda:0")`` raise "Torch not compiled with CUDA enabled"
on a CPU-only torch before any candidate site runs. The engine runs them on the CPU instead
(``reproducer_runtime.on_cpu``, asked by the Tracer and by the reproducer's Observer), so the bug
is confirmed and its reproducer, with the runtime carried inline, fails in a fresh process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: nothing to stand in for")

PROGRAM = """\
import torch
import torch.nn as nn

device = torch.device("cuda")
model = nn.Linear(4, 3).cuda()
x = torch.randn(8, 4, device="cuda")
y = torch.randint(0, 3, (8,)).to("cuda:0")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(50):
    p = torch.softmax(model(x.to(device)), dim=1)
    loss = -torch.log(p[torch.arange(8, device=device), y]).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
"""


def test_a_program_written_for_a_gpu_is_confirmed_and_reproduced_on_the_cpu(tmp_path: Path) -> None:
    program = tmp_path / "gpu_train.py"
    program.write_text(PROGRAM)
    out = tmp_path / "tests"
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "grist_lsp",
            "--check",
            str(program),
            "--budget",
            "2",
            "--write-reproducers",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 1, check.stdout + check.stderr
    assert "gpu_train.py:11:" in check.stdout and "GRIST101 [confirmed]" in check.stdout, check.stdout
    assert "CUDA" not in check.stdout, check.stdout
    [test_file] = out.glob("test_grist_*.py")
    run = cm.pytest_on(test_file)
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout
