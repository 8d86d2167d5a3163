"""What the engine's time goes to: a site no run reaches costs only the runs that showed it, and a
program that trains "until solved" is cut short, which the report says.

Assertions are on statuses, lines, notes and counts, never on seconds (``bench/`` measures those).
"""

from __future__ import annotations

from pathlib import Path

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.dynamic.engine import confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.model import Status

ENDLESS = """import torch

torch.manual_seed(0)
w = torch.zeros(2, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
step = 0
while True:  # trains "until solved", which it never is
    x = torch.randn(8, 2)
    p = torch.sigmoid(x @ w)
    loss = -torch.log(p).mean()
    if step < 0:  # never taken: no run reaches this line
        loss = loss + torch.exp(w).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
"""


def test_an_endless_training_script_ends_with_its_bug_confirmed_and_the_unreached_site_said_so(
    tmp_path: Path,
):
    """The loop never ends by itself: its ``log`` is confirmed, the ``exp`` no run reaches is
    reported as not reached, naming the recording run that was cut short, and no error (no
    deadline of the worker was hit)."""
    path = tmp_path / "endless.py"
    path.write_text(ENDLESS, encoding="utf-8")
    verdicts = analyze_source(str(path), ENDLESS)
    assert [(v.site.span.start_line, v.site.op, v.status) for v in verdicts] == [
        (10, "torch.log", Status.POSSIBLE),
        (12, "torch.exp", Status.POSSIBLE),
    ]
    out = confirm(str(path), ENDLESS, verdicts, EngineOptions(budget=2.0, timeout=20.0, seed=0))
    by_line = {v.site.span.start_line: v for v in out}
    assert sorted(by_line) == [10, 12], [v.message for v in out if v.status is Status.ERROR]
    log, exp = by_line[10], by_line[12]
    assert log.status is Status.CONFIRMED and log.witness is not None and log.witness.replayed, log.reason
    assert exp.status is Status.POSSIBLE and exp.witness is None
    assert "not reached by any entry" in exp.reason, exp.reason
    assert f"the recording run of script:{path} was cut short (stopped after 20 training steps)" in exp.reason
