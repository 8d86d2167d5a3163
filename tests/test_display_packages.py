"""Programs that draw while they train: `matplotlib.pyplot` (or seaborn, visdom, plotly,
tensorboardX) imported at the top, a figure updated every few steps. Where the package is not
installed the engine still runs the program (a drawing never feeds the computation), finds the
bug, and its reproducer fails in a fresh process on the same machine."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from grist_lsp.dynamic.reproducer_runtime import DISPLAY_ONLY, StandIn, stand_in_for_absent_display

# The GAN of a classic tutorial, in small: the discriminator's sigmoid reaches 1, log(1 - D) -inf.
GAN_WITH_PLOTS = """\
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(1)
ART = 15
POINTS = np.vstack([np.linspace(-1, 1, ART) for _ in range(64)])


def artist_works():
    a = np.random.uniform(1, 2, size=64)[:, np.newaxis]
    return torch.from_numpy(a * np.power(POINTS, 2) + (a - 1)).float()


G = nn.Sequential(nn.Linear(5, 128), nn.ReLU(), nn.Linear(128, ART))
D = nn.Sequential(nn.Linear(ART, 128), nn.ReLU(), nn.Linear(128, 1), nn.Sigmoid())
opt_D = torch.optim.Adam(D.parameters(), lr=0.0001)
opt_G = torch.optim.Adam(G.parameters(), lr=0.0001)
fig, ax = plt.subplots()
plt.ion()

for step in range(60):
    paintings = artist_works()
    fake = G(torch.randn(64, 5))
    prob_real = D(paintings)
    prob_fake = D(fake.detach())
    D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
    opt_D.zero_grad()
    D_loss.backward()
    opt_D.step()
    if step % 50 == 0:
        ax.cla()
        ax.plot(POINTS[0], fake.data.numpy()[0], c="#4AD631", lw=3)
        plt.text(-0.5, 2.3, "D accuracy=%.2f" % prob_real.data.numpy().mean())
        plt.pause(0.01)

plt.ioff()
plt.show()
"""
LOG_LINE = 28  # torch.log(1.0 - prob_fake)


def test_a_training_script_that_plots_is_checked_where_matplotlib_is_absent(
    grist_cli, write_tree, run_pytest
) -> None:
    project = write_tree({"gan.py": GAN_WITH_PLOTS})
    res = grist_cli("--check", "gan.py", "--format", "json", "--write-reproducers", "repro", cwd=project)
    assert res.returncode == 1, res.stdout + res.stderr
    findings = json.loads(res.stdout)["findings"]
    assert not [f for f in findings if f["status"] == "error"], findings
    confirmed = {(f["line"], f["column"]) for f in findings if f["status"] == "confirmed"}
    assert (LOG_LINE, 49) in confirmed, findings
    repro = run_pytest("repro", cwd=project)
    assert repro.returncode == 1 and " failed" in repro.stdout, repro.stdout + repro.stderr
    assert " error" not in repro.stdout.splitlines()[-1], repro.stdout


def test_an_installed_package_is_never_stood_in_for_and_a_stand_in_unpacks_like_a_figure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This process's import system is put back afterwards: other tests import for real.
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    stand_in_for_absent_display()
    stand_in_for_absent_display()  # once is enough: the finder is not added twice
    assert sum(type(f).__name__ == "AbsentDisplayFinder" for f in sys.meta_path) == 1
    assert importlib.util.find_spec("json").origin.endswith("json/__init__.py")
    absent = sorted(n for n in DISPLAY_ONLY if n not in sys.modules and not _installed(n))
    if not absent:
        pytest.fail("every display package is installed here: the stand-in cannot be exercised")
    module = importlib.import_module(f"{absent[0]}.sub.module")
    fig, (left, right) = module.subplots(1, 2)
    with fig.canvas as canvas:
        canvas.draw()[0, 1] = 3
    assert all(isinstance(x, StandIn) for x in (fig, left, right, canvas))


def _installed(name: str) -> bool:
    return any(
        type(f).__name__ != "AbsentDisplayFinder" and f.find_spec(name, None) is not None
        for f in sys.meta_path
        if hasattr(f, "find_spec")
    )
