"""Programs written for a GPU, checked on a machine without one.

``.cuda()``, ``device="cuda"`` and ``.to("cuda:0")`` raise "Torch not compiled with CUDA enabled"
on a CPU-only torch before any candidate site runs, and torch turns CUDA autocast off there. The
engine runs them on the CPU instead (``reproducer_runtime.on_cpu`` and ``RunHere``, the base of the
Tracer and of the reproducer's Observer), CUDA autocast as CPU float16 autocast, so the bug is
confirmed and its reproducer, with the runtime carried inline, fails in a fresh process.
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


AMP = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.randn(4, 16, 128).cuda()
to_q, to_k = nn.Linear(128, 128).cuda(), nn.Linear(128, 128).cuda()
with torch.cuda.amp.autocast():
    q, k = to_q(x), to_k(x)
    scores = q @ k.transpose(-2, -1)
    attn = scores.softmax(-1)
print(attn.float().sum().item())
"""


LEGACY = """\
import torch
from torch.autograd import Variable

x = Variable(torch.cuda.FloatTensor([[1.0, 2.0], [3.0, 4.0]]))
w = Variable(torch.randn(2, 2).type(torch.cuda.FloatTensor), requires_grad=True)
y = Variable(torch.FloatTensor([[0.0, 1.0]]).type("torch.cuda.FloatTensor"))
for step in range(30):
    h = torch.sigmoid(x @ w)
    loss = -(y * torch.log(h) + (1 - y) * torch.log(1 - h)).mean()
    loss.backward()
    w.data -= 0.5 * w.grad.data
    w.grad.data.zero_()
print(loss.item())
"""


@pytest.mark.parametrize(
    ("source", "where"),
    [
        (PROGRAM, "gpu_train.py:11:13: GRIST101 [confirmed]"),
        (AMP, "gpu_train.py:9:14: GRIST119 [confirmed]"),
        (LEGACY, "gpu_train.py:9:18: GRIST101 [confirmed]"),
    ],
    ids=["cuda-devices", "cuda-autocast", "cuda-legacy-types"],
)
def test_a_program_written_for_a_gpu_is_confirmed_and_reproduced_on_the_cpu(
    tmp_path: Path, source: str, where: str
) -> None:
    program = tmp_path / "gpu_train.py"
    program.write_text(source)
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
    assert where in check.stdout, check.stdout
    assert "CUDA" not in check.stdout, check.stdout
    tests = sorted(out.glob("test_grist_*.py"))
    assert tests, check.stdout
    for test_file in tests:
        run = cm.pytest_on(test_file)
        assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout
