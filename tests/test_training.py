"""GRIST's own setting: training programs, legacy ways of making data, and bugs two files away.

Every check here runs the real `grist-lsp` console script on small programs written the way
tutorials write them, and judges what a user sees: the finding's line and status, the witness
(the state training reached, how many steps led there), and a reproducer run by pytest in a
fresh process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from grist_lsp.analyzer.programs import has_training_loop, is_script
from grist_lsp.discovery import imported_modules
from grist_lsp.model import counted

# Logistic regression from an old tutorial: Variable(FloatTensor(list)), bare weights, SGD, an
# endless loop that exits once the loss is NaN (by itself after tens of thousands of steps).
WHILE_TRUE = """\
import sys
import torch
from torch.autograd import Variable

x_train = Variable(torch.FloatTensor([[1, 2], [2, 3], [3, 1], [4, 3], [5, 3], [6, 2]]))
y_train = Variable(torch.FloatTensor([[0], [0], [0], [1], [1], [1]]))
W = torch.zeros((2, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
optimizer = torch.optim.SGD([W, b], lr=1)

while True:
    hypothesis = torch.sigmoid(x_train.matmul(W) + b)
    cost = -(y_train * torch.log(hypothesis)).mean()
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    with open("results.txt", "a") as f:
        f.write(f"{cost.item()}\\n")
    if torch.isnan(cost) or torch.isinf(cost):
        sys.exit(0)
"""
LOG_LINE = 13

# Softmax regression on data made with the legacy typed constructor: the features must move
# (far beyond what training alone reaches in a few steps) for the log of a softmax to hit 0.
LEGACY = """\
import torch
import torch.nn.functional as F

x_train = torch.FloatTensor([[1, 2, 1, 1], [2, 1, 3, 2], [3, 1, 3, 4], [4, 1, 5, 5], [1, 7, 5, 5], [1, 6, 6, 6]])
y_train = torch.LongTensor([2, 2, 1, 1, 0, 0])
W = torch.zeros((4, 3), requires_grad=True)
optimizer = torch.optim.SGD([W], lr=0.1)

for step in range(1000000):
    z = x_train.matmul(W)
    cost = -torch.log(F.softmax(z, dim=1)).gather(1, y_train.unsqueeze(1)).mean()
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
"""


def _check(grist_cli, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    result = grist_cli("--check", *args, "--format", "json", cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads(result.stdout)["findings"]


def test_a_while_true_script_that_exits_on_nan_is_confirmed_with_its_own_data_and_the_weights_grown(
    grist_cli, write_tree, run_pytest
):
    """GRIST's training run breaks the log in a few steps by steering x_train far past its values
    (1 to 6); the witness a maintainer believes keeps x_train within them and grows the weights,
    as the program's own training does over tens of thousands of steps (issue 37, item 6)."""
    project = write_tree({"train.py": WHILE_TRUE})
    before = (project / "train.py").read_text()
    result, findings = _check(grist_cli, project, "train.py", "--write-reproducers", "repro")
    assert result.returncode == 1, result.stdout + result.stderr
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (LOG_LINE, "confirmed"), log
    witness = log["witness"]
    assert witness["entry"].startswith("script:")
    assert witness["beyond_examples"] is not None and witness["beyond_examples"] <= 1, witness
    assert witness["weights_moved"].get("W", 0) > 1, witness
    assert "weights moved" in log["message"], log["message"]
    # The program's own file is untouched, and its results file was not written in the project.
    assert (project / "train.py").read_text() == before
    assert not (project / "results.txt").exists()

    # The reproducer fails in a fresh process while the bug is there...
    repro = project / "repro"
    failing = run_pytest(repro, cwd=project)
    assert failing.returncode == 1 and " failed" in failing.stdout, failing.stdout + failing.stderr
    assert " error" not in failing.stdout.splitlines()[-1]
    # ...and passes once the verified fix is applied.
    fixed = grist_cli("--check", "train.py", "--fix", cwd=project)
    assert fixed.returncode in (0, 1), fixed.stderr
    assert (project / "train.py").read_text() != before
    passing = run_pytest(repro, cwd=project)
    assert passing.returncode == 0, passing.stdout + passing.stderr


def test_data_made_by_a_legacy_constructor_is_an_input_the_search_moves(grist_cli, write_tree):
    project = write_tree({"softmax.py": LEGACY})
    _, findings = _check(grist_cli, project, "softmax.py")
    [log] = [f for f in findings if f["kind"] == "log"]
    assert log["status"] == "confirmed", log
    inputs = log["witness"]["inputs"]
    [(key, value)] = [(k, v) for k, v in inputs.items() if v["dtype"] == "float32" and v["shape"][-1] == 4]
    assert key.startswith(
        "softmax.py:10:"
    )  # keyed by its first use: FloatTensor is no torch call the mode sees
    # ...and named by the variable that held it there, in the witness and in the message.
    assert log["witness"]["input_names"][key] == "x_train"
    assert "when x_train = " in log["message"], log["message"]
    original = [[1, 2, 1, 1], [2, 1, 3, 2], [3, 1, 3, 4], [4, 1, 5, 5], [1, 6, 6, 6], [1, 7, 5, 5]]
    rows = value["values"]
    assert rows is not None and any(row not in original for row in rows), rows


# An endless loop that never checks its loss: once log_softmax replaces the log of a softmax,
# nothing stops it but the replay's own step count. Labels are the whole batch, so a witness cut
# to one row would break nll_loss after the fix instead of passing.
ENDLESS = """\
import torch
import torch.nn.functional as F

x = torch.FloatTensor([[1, 2, 1, 1], [2, 1, 3, 2], [3, 1, 3, 4], [4, 1, 5, 5], [1, 7, 5, 5], [1, 6, 6, 6]])
y = torch.LongTensor([2, 2, 1, 1, 0, 0])
W = torch.zeros((4, 3), requires_grad=True)
optimizer = torch.optim.SGD([W], lr=0.5)

while True:
    cost = F.nll_loss(torch.log(F.softmax(x.matmul(W), dim=1)), y)
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
"""


def test_a_fix_that_removes_the_op_from_an_endless_loop_is_verified_and_its_reproducer_passes(
    grist_cli, write_tree, run_pytest
):
    project = write_tree({"train.py": ENDLESS})
    _, findings = _check(grist_cli, project, "train.py", "--write-reproducers", "repro")
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (10, "confirmed"), log
    verified = [fix["title"] for fix in log["fixes"] if fix["verified"]]
    assert verified[0] == "Use log_softmax", log["fixes"]
    assert run_pytest(project / "repro", cwd=project).returncode == 1
    grist_cli("--check", "train.py", "--fix", cwd=project)
    assert "F.log_softmax(x.matmul(W), dim=1)" in (project / "train.py").read_text()
    passing = run_pytest(project / "repro", cwd=project)
    assert passing.returncode == 0, passing.stdout + passing.stderr


# Batches from worker processes, as most training scripts load them: the engine runs the
# DataLoader in the program's process (the workers' sockets are refused by the sandbox, and what
# they build no tracer sees), and so does the reproducer.
WORKERS = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    x = torch.randn(256, 4) * 3
    y = (x[:, 0] > 0).long()
    loader = DataLoader(
        TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=2, persistent_workers=True, prefetch_factor=4
    )
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    for epoch in range(2000):
        for xb, yb in loader:
            loss = -(F.one_hot(yb, 2) * torch.log(F.softmax(model(xb), dim=1))).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
"""


def test_a_script_whose_dataloader_has_worker_processes_is_confirmed_and_reproduced(
    grist_cli, write_tree, run_pytest
):
    project = write_tree({"train.py": WORKERS})
    result, findings = _check(grist_cli, project, "train.py", "--write-reproducers", "repro")
    assert "blocked" not in result.stderr, result.stderr
    [log] = [f for f in findings if f["kind"] == "log"]
    assert (log["line"], log["status"]) == (17, "confirmed"), log
    assert log["witness"]["entry"].startswith("script:")
    failing = run_pytest(project / "repro", cwd=project)
    assert failing.returncode == 1 and " failed" in failing.stdout, failing.stdout + failing.stderr


# A custom Dataset whose items are made from numpy one by one: torch first sees them inside the
# DataLoader's collate, stacked into a batch. Training alone reaches the log of 1 - p (p rounds to
# 1 after a few hundred steps); the log of p needs the batch's items moved.
CUSTOM_DATASET = """\
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.X = rng.normal(size=(n, 3)).astype(np.float32)
        self.y = (self.X.sum(axis=1) > 0).astype(np.float32)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return torch.from_numpy(self.X[i]), torch.tensor(self.y[i])


model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=1.0)
loader = DataLoader(Points(64), batch_size=16, shuffle=True)
for epoch in range(10000):
    for xb, yb in loader:
        p = torch.sigmoid(model(xb).squeeze(1))
        loss = -(yb * torch.log(p) + (1 - yb) * torch.log(1 - p)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if not torch.isfinite(loss):
            sys.exit(0)
"""


def test_the_items_of_a_custom_dataset_are_inputs_the_search_moves(grist_cli, write_tree, run_pytest):
    project = write_tree({"train.py": CUSTOM_DATASET})
    result, findings = _check(grist_cli, project, "train.py", "--write-reproducers", "repro")
    logs = sorted((f for f in findings if f["kind"] == "log"), key=lambda f: f["column"])
    assert [(f["line"], f["status"]) for f in logs] == [(27, "confirmed"), (27, "confirmed")], logs
    log_p = logs[0]
    names = log_p["witness"]["input_names"]
    moved = [k for k in log_p["witness"]["inputs"] if names.get(k, "").startswith("item ")]
    assert moved and all(names[k].endswith("of the batch at line 25") for k in moved), names
    assert "item " in log_p["message"] and "of the batch at line 25" in log_p["message"], log_p["message"]
    failing = run_pytest(project / "repro", cwd=project)
    assert failing.returncode == 1 and "2 failed" in failing.stdout, failing.stdout + failing.stderr


# The features are derived from the data once, before the loop: with the data steered (it requires
# grad), every step backpropagates through that one derivation too.
DERIVED_ONCE = WHILE_TRUE.replace(
    "W = torch.zeros((2, 1), requires_grad=True)",
    "x_train = x_train * 2.0 - 1.0\nW = torch.zeros((2, 1), requires_grad=True)",
)


def test_a_tensor_derived_from_the_data_before_the_loop_does_not_stop_the_training_run(
    tmp_path: Path, monkeypatch
):
    """The training run itself, in this process: it trains on, it does not fail at step 2."""
    monkeypatch.chdir(tmp_path)  # the program appends to results.txt in its working folder
    from grist_lsp.analyzer.analysis import analyze_source
    from grist_lsp.dynamic import entries as E
    from grist_lsp.dynamic.training import TrainingSettings, train_search

    path = tmp_path / "train.py"
    path.write_text(DERIVED_ONCE)
    sites = [v.site for v in analyze_source(str(path), DERIVED_ONCE) if v.site.op]
    with E.program_imports(str(path), DERIVED_ONCE):
        program = E.program_from_label(f"script:{path}", str(path), DERIVED_ONCE, 0, {})
        program.produce_only(program.setup)
        report = train_search(program, sites, {s.key for s in sites}, TrainingSettings(seconds=5.0))
    assert report.error is None, report.note
    assert report.steps > 1, report.note


OWN_OPTIMIZER = """\
import torch


class LogSGD(torch.optim.Optimizer):
    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                scale = torch.log(p.grad.abs())
                p.sub_(group["lr"] * p.grad * scale.exp())


x = torch.randn(16, 3)
y = torch.randn(16, 1)
W = torch.zeros((3, 1), requires_grad=True)
unused = torch.zeros(1, requires_grad=True)
optimizer = LogSGD([W, unused], lr=0.1)
for step in range(1000):
    loss = ((x @ W - y) ** 2).mean() + 0.0 * unused.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_training_run_still_watches_the_sites_inside_the_programs_own_optimizer(
    tmp_path: Path, monkeypatch
):
    """torch's own optimizers' steps are not traced (nothing of the file's runs there); a class of
    the program's own is: its log of a zero gradient is found by the training run."""
    monkeypatch.chdir(tmp_path)
    from grist_lsp.analyzer.analysis import analyze_source
    from grist_lsp.dynamic import entries as E
    from grist_lsp.dynamic.training import TrainingSettings, train_search

    path = tmp_path / "own_optimizer.py"
    path.write_text(OWN_OPTIMIZER)
    sites = [v.site for v in analyze_source(str(path), OWN_OPTIMIZER) if v.site.op]
    [log] = [s for s in sites if s.kind == "log"]
    with E.program_imports(str(path), OWN_OPTIMIZER):
        program = E.program_from_label(f"script:{path}", str(path), OWN_OPTIMIZER, 0, {})
        program.produce_only(program.setup)
        report = train_search(program, sites, {log.key}, TrainingSettings(seconds=10.0))
    assert report.found is not None, report.note
    assert report.found.outcome.site.key == log.key


LIBRARY = """\
import torch


def rms_distance(a, b):
    return torch.sqrt(((a - b) ** 2).mean(dim=1)).mean()
"""
TEST = """\
import torch

from mylib.losses import rms_distance


def test_rms_distance_is_small_for_close_points():
    a = torch.randn(4, 3)
    b = a + 0.01 * torch.randn(4, 3)
    assert rms_distance(a, b) < 1.0
"""


def test_checking_a_test_file_reports_the_bug_in_the_module_it_imports(grist_cli, write_tree):
    project = write_tree(
        {
            "mylib/__init__.py": "",
            "mylib/losses.py": LIBRARY,
            "tests/test_losses.py": TEST,
            "pyproject.toml": "[project]\nname = 'mylib'\n",
        }
    )
    result, findings = _check(grist_cli, project, "tests/test_losses.py")
    assert result.returncode == 1, result.stdout + result.stderr
    [sqrt] = [f for f in findings if f["kind"] == "sqrt"]
    assert Path(sqrt["file"]).as_posix().endswith("mylib/losses.py")
    assert (sqrt["line"], sqrt["status"]) == (5, "confirmed")
    assert sqrt["witness"]["entry"].startswith("test:") and "test_losses.py" in sqrt["witness"]["entry"]


MODEL = """\
import torch


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x, counts):
        return torch.log(counts) + self.lin(x)
"""
SCRIPT = """\
import torch

from model import Scorer

model = Scorer()
counts = torch.tensor([[3.0], [5.0], [2.0], [4.0]])
x = torch.randn(4, 3)
print(model(x, counts).sum())
"""


def test_checking_a_model_file_enters_it_through_the_project_script_that_imports_it(grist_cli, write_tree):
    project = write_tree({"model.py": MODEL, "run.py": SCRIPT})
    _, findings = _check(grist_cli, project, "model.py")
    [log] = [f for f in findings if f["kind"] == "log"]
    assert log["status"] == "confirmed", log
    # The script's own counts, moved to 0, not made-up inputs from a probe.
    assert log["witness"]["entry"].startswith("run:") and log["witness"]["entry"].endswith("run.py")


def test_a_loop_that_calls_backward_is_a_training_program():
    assert has_training_loop(WHILE_TRUE)
    assert has_training_loop(LEGACY)
    assert not has_training_loop("import torch\nfor i in range(3):\n    print(torch.log(torch.ones(2)))\n")
    assert not has_training_loop("def broken(:\n")
    assert is_script(WHILE_TRUE) and not is_script(LIBRARY)


def test_imports_resolve_to_project_modules_only(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core.py").write_text("X = 1\n")
    (tmp_path / "helpers.py").write_text("Y = 2\n")
    text = "import torch\nimport numpy as np\nfrom pkg import core\nimport helpers\nfrom . import nothing\n"
    found = imported_modules(tmp_path / "main.py", text, tmp_path)
    assert {p.relative_to(tmp_path.resolve()).as_posix() for p in found} == {
        "pkg/__init__.py",
        "pkg/core.py",
        "helpers.py",
    }


# Issue 23's shapes, as a user checks them. The programs are the training bench's own
# (bench/training/), so the bench and these tests judge the same files.
BENCH = Path(__file__).resolve().parents[1] / "bench" / "training"


def _project(tmp_path: Path, name: str) -> Path:
    source = BENCH / name
    if source.is_dir():
        shutil.copytree(source, tmp_path / name)
        return tmp_path / name
    shutil.copy(source, tmp_path / name)
    return tmp_path


def _findings(grist_cli, cwd: Path, *args: str) -> list[dict]:
    return _check(grist_cli, cwd, *args)[1]


def _reproducers_fail(run_pytest, folder: Path, cwd: Path, count: int) -> None:
    run = run_pytest(folder, cwd=cwd)
    assert run.returncode == 1 and f"{count} failed" in run.stdout, run.stdout + run.stderr
    assert " error" not in run.stdout.splitlines()[-1], run.stdout


def _at(findings: list[dict], kind: str) -> list[tuple[int, str]]:
    return sorted((f["line"], f["status"]) for f in findings if f["kind"] == kind)


def _confirmed_alone(grist_cli, run_pytest, cwd: Path, name: str, kind: str, line: int) -> dict:
    """Check ``name`` in ``cwd`` writing reproducers: its one ``kind`` site is confirmed at
    ``line`` and the file's one reproducer fails in a fresh process. That finding."""
    findings = _findings(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, kind) == [(line, "confirmed")], findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 1)
    [finding] = [f for f in findings if f["kind"] == kind]
    return finding


def test_free_logits_rewrapped_by_variable_go_as_far_as_the_softmax_needs_and_say_how_far(
    grist_cli, tmp_path: Path, run_pytest
):
    """softmax underflows at a logit gap of ~104 in float32; z starts in [0, 1). The program made
    z trainable itself (``requires_grad=True``): the witness lists it with the weights it moved,
    and how far, and no input went past the program's range (issue 37, item 6)."""
    name = "free_logits_variable_loop.py"
    witness = _confirmed_alone(grist_cli, run_pytest, _project(tmp_path, name), name, "log", 19)["witness"]
    assert witness["weights_moved"].get("z", 0) > 10, witness
    assert (witness["beyond_examples"] or 0) <= 1, witness


def test_an_endless_evaluation_loop_without_backward_is_checked_without_running_out(
    grist_cli, tmp_path: Path, run_pytest
):
    """A numpy batch each iteration, no backward; a second log waits for the NaN. What the engine
    keeps per iteration is bounded, so the check neither runs out of memory nor of time."""
    name = "eval_numpy_no_backward.py"
    cwd = _project(tmp_path, name)
    findings = _findings(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert not [f for f in findings if f["status"] == "error"], findings
    # The second log is reached once the first is -inf: the first one's witness breaks it too.
    assert _at(findings, "log") == [(14, "confirmed"), (19, "confirmed")], findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 2)


def test_manual_training_by_rebinding_replays_in_a_fresh_process(grist_cli, tmp_path: Path, run_pytest):
    """W = W - lr * W.grad under no_grad, W.requires_grad_(True) each step: the weights of the
    failing step are new tensors, and the witness still puts them back."""
    name = "manual_rebind_logreg.py"
    cwd = _project(tmp_path, name)
    findings = _findings(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, "log") == [(17, "confirmed"), (17, "confirmed")], findings
    assert not any("did not replay" in (f["reason"] or "") for f in findings), findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 2)


@pytest.mark.parametrize("checked", ["pkg/losses/some_loss.py", "tests/test_losses.py", "."])
def test_a_library_loss_is_checked_through_the_test_that_calls_it(grist_cli, tmp_path: Path, checked: str):
    """The test imports the loss through its package (``from pkg.losses import ...``): checking
    the loss file, the test file or the project root reports it at the loss's own line."""
    cwd = _project(tmp_path, "losses_project")
    findings = _findings(grist_cli, cwd, checked)
    [sqrt] = [f for f in findings if f["kind"] == "sqrt" and f["status"] != "safe"]
    assert Path(sqrt["file"]).as_posix().endswith("pkg/losses/some_loss.py"), sqrt
    assert (sqrt["line"], sqrt["status"]) == (7, "confirmed"), sqrt
    assert sqrt["witness"]["entry"].startswith("test:"), sqrt["witness"]


def test_a_site_shadowed_by_an_upstream_one_is_searched_with_the_upstream_kept_valid(
    grist_cli, tmp_path: Path, run_pytest
):
    """All-padding rows make the log_softmax NaN; a partly padded row breaks exp(logp) * logp."""
    name = "shadowed_padded_entropy.py"
    cwd = _project(tmp_path, name)
    findings = _findings(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, "softmax") == [(8, "confirmed")], findings
    assert _at(findings, "inf_arith") == [(9, "confirmed")], findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 2)


def test_a_confirmations_fix_is_verified_beside_a_site_still_searched_and_that_site_keeps_its_proposal(
    grist_cli, tmp_path: Path
):
    """The acos breaks within a few runs, the division never: the acos's fix is checked while
    the division is still searched (``service._EarlyFixes``), and the report has both, each with
    what it would have had if the fixes were all checked after the search. (The bench program's
    own division does break, with a zero input row and a zero bias: here its norms are floored
    by a setting read at run time, which no search moves and the static pass cannot bound.)"""
    name = "angle_acos_while.py"
    text = (BENCH / name).read_text()
    norms = "(u.norm(dim=1) * v.norm(dim=1))"
    assert norms in text
    floored = text.replace(norms, f"{norms}.clamp_min(FLOOR)").replace(
        "step = 0\n", "FLOOR = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-6\nstep = 0\n"
    )
    (tmp_path / name).write_text(floored)
    cwd = tmp_path
    findings = _findings(grist_cli, cwd, name)
    by_line = {f["line"]: f for f in findings if f["status"] in ("confirmed", "possible")}
    acos, div = by_line[19], by_line[18]
    assert (acos["kind"], acos["status"]) == ("acos", "confirmed"), acos
    assert acos["fixes"] and acos["fixes"][0]["verified"], acos["fixes"]
    assert (div["kind"], div["status"]) == ("div", "possible"), div
    assert div["fixes"] and not any(fix["verified"] for fix in div["fixes"]), div["fixes"]


def test_free_logits_with_labels_drawn_anew_each_iteration_are_confirmed(
    grist_cli, tmp_path: Path, run_pytest
):
    """``torch.randint`` in an endless loop without backward: each iteration's labels are an input
    of their own; setting a label is one move for all of them, not one per iteration, so the
    search still has its runs for the free logits."""
    name = "free_logits_redrawn_labels.py"
    cwd = _project(tmp_path, name)
    findings = _findings(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, "log") == [(16, "confirmed")], findings
    assert not [f for f in findings if f["status"] == "error"], findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 1)


def test_every_statement_taking_the_log_of_one_softmax_is_confirmed(grist_cli, tmp_path: Path, run_pytest):
    """A walkthrough prints ``torch.log(probs)`` four ways before its endless loop: the witness of
    the first breaks the others too (``Worker.sweep``), each replayed and reproduced on its own.
    The helper module it imports is searched too, behind a loop that meets none of its sites
    (``QUIET_CALLS`` stops those runs; see test_engine_units)."""
    cwd = _project(tmp_path, "walkthrough_project")
    findings = _findings(grist_cli, cwd, "walkthrough.py", "--write-reproducers", "repro")
    assert _at(findings, "log") == [(line, "confirmed") for line in (16, 17, 18, 19, 28)], findings
    assert not [f for f in findings if f["status"] == "error"], findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 5)


def test_a_model_built_again_under_the_same_names_is_a_new_weight_not_a_training_step(
    grist_cli, tmp_path: Path, run_pytest
):
    """``W = torch.zeros(...)`` twice: the second W is not the first one rebound by manual
    training, so the state of the trained one replays; and a site before the endless training
    loop, met once, does not keep a search's run going through the loop."""
    name = "two_models_same_names.py"
    cwd = _project(tmp_path, name)
    findings = _findings(grist_cli, cwd, name, "--write-reproducers", "repro")
    assert _at(findings, "log") == [(12, "confirmed")] * 2 + [(21, "confirmed")] * 2, findings
    assert not any("did not replay" in (f["reason"] or "") for f in findings), findings
    _reproducers_fail(run_pytest, cwd / "repro", cwd, 4)


def test_a_vae_log_variance_overflow_is_confirmed_with_the_images_as_they_are(
    grist_cli, tmp_path: Path, run_pytest
):
    """Issue 37, item 6: the overflow of exp(0.5 * logvar) is what training reaches by growing the
    encoder's weights; a witness with pixels of 46 for images in [0, 1] is one a maintainer
    closes. The witness keeps the images within the range the program used and moves weights,
    and its reproducer fails in a fresh process."""
    name = "vae_logvar_images.py"
    witness = _confirmed_alone(grist_cli, run_pytest, _project(tmp_path, name), name, "exp", 21)["witness"]
    assert witness["beyond_examples"] is not None and witness["beyond_examples"] <= 1, witness
    assert witness["weights_moved"], witness


@pytest.mark.parametrize(
    "name,line",
    [("softmax_bare_while.py", 24), ("zero_softmax_784_sgd.py", 18)],
    ids=["a GRIST training run's witness", "weights that training breaks sooner"],
)
def test_a_softmax_regression_is_confirmed_with_its_own_inputs_and_the_weights_grown(
    grist_cli, tmp_path: Path, run_pytest, name: str, line: int
):
    """Issue 37, item 6: the first witness of these zero-initialised softmax regressions takes
    the inputs past the range the program used (a GRIST training run steers them 48x out, for
    the first). A second search keeps them within it and grows the weights past where a
    zero-initialised weight's first search may take them (1), to a logit gap that underflows
    float32's softmax; in the second, the moved weights break the log a few training steps
    before the step the search aimed at, which is the witness (the state after those steps). Its
    reproducer fails in a fresh process."""
    log = _confirmed_alone(grist_cli, run_pytest, _project(tmp_path, name), name, "log", line)
    witness = log["witness"]
    assert witness["beyond_examples"] is not None and witness["beyond_examples"] <= 1, witness
    assert witness["weights_moved"], witness
    if name == "zero_softmax_784_sgd.py":
        assert isinstance(witness["steps"], int) and witness["steps"] >= 1, witness
        assert f"after {counted(witness['steps'], 'training step')}" in log["message"], log["message"]


@pytest.mark.parametrize(
    "name,line",
    [("l1_column_norm_while.py", 16), ("l2_penalty_div_while.py", 18)],
    ids=["sum of absolute weights", "L2 penalty (w ** 2)"],
)
def test_a_division_by_a_norm_of_the_weights_is_confirmed_where_they_are_zero(
    grist_cli, tmp_path: Path, run_pytest, name: str, line: int
):
    """Issue 37, item 3: a divisor made of the weights' magnitudes (a column's sum of absolute
    weights, an L2 penalty written ``w ** 2``) is 0 where those weights are, as in a
    zero-initialised or pruned layer; its fixed twin (an epsilon in the divisor) is never
    confirmed. The L2 one reads the weight through Python's ``**``, which the search's moved
    weights reach too."""
    cwd = _project(tmp_path, name)
    _confirmed_alone(grist_cli, run_pytest, cwd, name, "div", line)
    fixed = name.replace(".py", "_fixed.py")
    shutil.copy(BENCH / fixed, cwd / fixed)
    assert not [f for f in _findings(grist_cli, cwd, fixed) if f["status"] == "confirmed"]
