"""The engine's parts in-process: tracer positions, substitution, oracle, search, witness values, replay.

These run the user's code in the test process on purpose (tiny programs written here), to
check one part at a time; tests/test_engine.py covers the worker subprocesses end to end.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from grist_lsp.analyzer.catalogue import lookup
from grist_lsp.dynamic import entries as E
from grist_lsp.dynamic.engine import _SiteLines, confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.dynamic.protocol import SiteReport
from grist_lsp.dynamic.replay import replay
from grist_lsp.dynamic.search import (
    GIVE_UP_AFTER,
    LABEL_MUTATION,
    UNMEASURED_AFTER,
    Evaluation,
    Search,
    SearchSettings,
    _why_unbroken,
    mutations,
    search,
)
from grist_lsp.dynamic.tracing import SiteOutcome
from grist_lsp.dynamic.witness import INLINE_LIMIT, from_value, shrink, to_value
from grist_lsp.model import Site, Span, Status, Verdict, Witness, to_json, witness_from_json

torch.set_num_threads(1)


def site_at(path: Path, text: str, snippet: str, op: str, function: str | None = None) -> Site:
    for i, line in enumerate(text.splitlines(), start=1):
        col = line.find(snippet)
        if col >= 0:
            row = lookup(op)[0]
            return Site(
                str(path),
                Span(i, col, i, col + len(snippet)),
                op,
                row.kind,
                row.operand_keyword,
                snippet,
                function,
            )
    raise AssertionError(snippet)


def script(tmp_path: Path, name: str, text: str) -> E.ScriptProgram:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    target = str(path.resolve())
    prog = E.ScriptProgram(
        label=f"script:{path}",
        target_file=target,
        texts={target: text},
        user_files=frozenset({target}),
        text=text,
    )
    prog.setup()
    return prog


def record(prog: E.Program, sites: list[Site]):
    tracer, _, error = prog.run(prog.tracer_config(sites=sites, record=True, stop_when_all_reached=True))
    assert error is None, error
    return tracer


def record_script(tmp_path: Path, name: str, text: str, snippet: str, op: str):
    """The recording run of script ``text`` for its one site at ``snippet``."""
    prog = script(tmp_path, name, text)
    return record(prog, [site_at(tmp_path / name, text, snippet, op)])


def test_positions_are_code_points_on_lines_with_wide_characters(tmp_path):
    # 'é' and '→' take 2 and 3 bytes in UTF-8: CPython's byte columns must be converted.
    text = "import torch\nx = torch.randn(3)\nlabel = 'é→'; y = torch.log(x)\n"
    prog = script(tmp_path, "wide.py", text)
    site = site_at(tmp_path / "wide.py", text, "torch.log(x)", "torch.log")
    assert site.span.start_col == 18
    tracer = record(prog, [site])
    assert site.key in tracer.reached
    assert tracer.reached[site.key].position == (3, 18, 3, 30)


def test_nested_sites_map_to_the_innermost_matching_span(tmp_path):
    text = "import torch\nx = torch.rand(4) + 1\ny = torch.log(torch.log(x))\n"
    prog = script(tmp_path, "nested.py", text)
    outer = site_at(tmp_path / "nested.py", text, "torch.log(torch.log(x))", "torch.log")
    inner = site_at(tmp_path / "nested.py", text, "torch.log(x)", "torch.log")
    tracer = record(prog, [outer, inner])
    assert tracer.reached[inner.key].position[1] == inner.span.start_col
    assert tracer.reached[outer.key].position[1] == outer.span.start_col


def test_factories_in_user_code_are_inputs_keyed_by_line_and_occurrence(tmp_path):
    text = (
        "import torch, numpy as np\n"
        "eps = torch.tensor(1e-8)\n"  # a one-element literal: a constant, not an input
        "lin = torch.nn.Linear(3, 2)\n"  # its weights are made inside torch: not inputs
        "for i in range(2):\n"
        "    x = torch.randn(4, 3)\n"
        "a = torch.from_numpy(np.ones((2, 3), dtype=np.float32))\n"
        "y = torch.log(lin(x).abs() + a.sum() + eps)\n"
    )
    tracer = record_script(
        tmp_path, "inputs.py", text, "torch.log(lin(x).abs() + a.sum() + eps)", "torch.log"
    )
    # from_numpy does not pass through the mode: the tensor is caught where it is first used as an
    # operand (line 7), never having been produced under the mode.
    assert sorted(tracer.recorded) == [
        "inputs.py:5:torch.randn#0",
        "inputs.py:5:torch.randn#1",
        "inputs.py:7:operand#0",
    ]


def test_an_input_made_from_a_numpy_array_is_named_after_the_array(tmp_path):
    """``torch.from_numpy(data).float()``: no variable holds the tensor torch first sees (the
    float64 view), so the witness names it after the array it views."""
    text = (
        "import torch, numpy as np\n"
        "data = np.ones((4, 3))\n"
        "x = torch.from_numpy(data).float()\n"
        "kept = torch.from_numpy(np.zeros((2, 2)))\n"
        "y = torch.log(x + kept.sum())\n"
    )
    tracer = record_script(tmp_path, "arrays.py", text, "torch.log(x + kept.sum())", "torch.log")
    assert tracer.input_names == {"arrays.py:3:operand#0": "data", "arrays.py:5:operand#0": "kept"}


def test_a_training_run_does_not_hold_the_tensors_its_loop_makes_anew_each_step(tmp_path, monkeypatch):
    """A batch made from numpy in every iteration is a new tensor each step: steering one is never
    used, and holding each (a leaf, its steered copy, its recorded value) grew a long run's memory
    without end. The first step's batch stays an input; the later ones pass through."""
    from grist_lsp.dynamic import training as T

    text = (
        "import numpy as np, torch\n"
        "X = np.random.rand(40, 4).astype(np.float32)\n"
        "w = torch.zeros(4, requires_grad=True)\n"
        "opt = torch.optim.SGD([w], lr=0.01)\n"
        "for i in range(300):\n"
        "    xb = torch.from_numpy(X[i % 10 : i % 10 + 4])\n"
        "    loss = torch.log((xb @ w).exp().sum())\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    prog = script(tmp_path, "batches.py", text)
    site = site_at(tmp_path / "batches.py", text, "torch.log((xb @ w).exp().sum())", "torch.log")
    tracers: list = []

    class Watched(T.TrainingTracer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            tracers.append(self)

    monkeypatch.setattr(T, "TrainingTracer", Watched)
    report = T.train_search(prog, [site], {site.key}, T.TrainingSettings(seconds=60.0))
    assert report.found is None and report.steps == 300, report.note
    [tracer] = tracers
    assert list(tracer.inputs) == ["batches.py:7:operand#0"]
    assert list(tracer.recorded) == ["batches.py:7:operand#0"]


def test_oracle_blames_the_op_that_turns_finite_into_nan_not_the_one_after(tmp_path):
    text = "import torch\nx = torch.tensor([-1.0, 2.0])\ny = torch.sqrt(x)\nz = torch.log(y)\n"
    prog = script(tmp_path, "chain.py", text)
    sq = site_at(tmp_path / "chain.py", text, "torch.sqrt(x)", "torch.sqrt")
    lg = site_at(tmp_path / "chain.py", text, "torch.log(y)", "torch.log")
    tracer = record(prog, [sq, lg])
    assert tracer.reached[sq.key].found and tracer.reached[sq.key].result == "nan"
    assert not tracer.reached[lg.key].found and tracer.reached[lg.key].result == "upstream"


def test_search_reaches_log_zero_through_softmax_by_gradient(tmp_path):
    text = "import torch\nx = torch.randn(4, 5)\np = torch.softmax(x, dim=1)\ny = torch.log(p)\n"
    prog = script(tmp_path, "sm.py", text)
    site = site_at(tmp_path / "sm.py", text, "torch.log(p)", "torch.log")
    tracer = record(prog, [site])
    report = search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=20.0, seed=0))
    assert report.found is not None, report.note
    assert report.found.outcome.result == "-inf"
    x = report.found.values["sm.py:2:torch.randn#0"]
    assert float(x.abs().max()) <= 100 * float(tracer.recorded["sm.py:2:torch.randn#0"].abs().max())
    # Deterministic: the same seed walks the same path to the same inputs.
    again = search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=20.0, seed=0))
    assert torch.equal(again.found.values["sm.py:2:torch.randn#0"], x)
    assert again.iterations == report.iterations


def test_a_search_stopped_by_the_clock_goes_on_where_it_stopped(tmp_path):
    """Slices of one search (a site's turns between training runs) add up: the runs counted go
    on from the first slice's, and the slices together reach what one search reaches."""
    text = "import torch\nx = torch.randn(4, 5)\np = torch.softmax(x, dim=1)\ny = torch.log(p)\n"
    prog = script(tmp_path, "sm.py", text)
    site = site_at(tmp_path / "sm.py", text, "torch.log(p)", "torch.log")
    tracer = record(prog, [site])
    sliced = Search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=0.001, seed=0), None)
    report = sliced.run()
    first = report.iterations
    slices = 1
    while report.found is None and sliced.resumable and slices < 2000:
        report = sliced.resume(0.001)
        slices += 1
    assert report.found is not None, report.note
    assert report.found.outcome.result == "-inf"
    assert slices > 1 and report.found.iterations > first


def _guarded_log_search(tmp_path: Path) -> Search:
    """A search of ``torch.log(x.abs() + 1e-3)``, whose operand never comes below 1e-3."""
    text = "import torch\nx = torch.randn(4, 5)\ny = torch.log(x.abs() + 1e-3)\n"
    prog = script(tmp_path, "guard.py", text)
    site = site_at(tmp_path / "guard.py", text, "torch.log(x.abs() + 1e-3)", "torch.log")
    tracer = record(prog, [site])
    return Search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=60.0, seed=0), None)


def test_a_search_that_gets_no_closer_stops_before_its_budget_and_says_so(tmp_path):
    # |x| + 1e-3 is never below 1e-3: once every move has had its turn and nothing comes closer
    # for GIVE_UP_AFTER runs, the search stops (its 60 s budget would otherwise all be spent).
    s = _guarded_log_search(tmp_path)
    report = s.run()
    # Counted in runs, not seconds: it stopped by the stall rule (never by the clock, which sets
    # no ``stalled``), once no run had come closer for GIVE_UP_AFTER runs, and it says how many.
    assert report.found is None and report.stalled
    since = report.iterations - s.improved_at
    assert since >= max(GIVE_UP_AFTER, s.improved_at)
    assert "closest distance to the region" in report.note
    assert f"none closer in its last {since} runs (it stopped there)" in report.note
    # Resuming a stalled search gives up again at once: nothing new to try.
    again = s.resume(60.0)
    assert again.stalled and again.iterations == report.iterations


def test_a_search_whose_operand_reached_the_region_says_why_it_broke_nothing(tmp_path):
    """Issue 37, item 1: "closest distance 0" on a site left possible read as a search that got
    there and lost it. A run whose operand sits in the region but whose result is finite is
    reported as such, with the run and the reason, never as a distance of 0."""
    s = _guarded_log_search(tmp_path)
    site = s.site
    report = s.run()
    assert report.found is None and "closest distance to the region" in report.note
    # The same search had a run on the region's edge whose result stayed finite (as sqrt(0) is):
    edge = SiteOutcome(site, False, "finite", operand=torch.zeros(3), distance=torch.zeros(()))
    s._saw(Evaluation(edge, None, 0.0, {}, [], {}, {}))
    note = s.give_up().note
    assert "closest distance" not in note, note
    assert "the operand reached the region (x <= 0) but broke nothing" in note
    assert "the op's result stayed finite" in note
    # A where-discarded value whose gradient the program masks says so instead.
    branch = Site(
        site.file,
        site.span,
        site.op,
        site.kind,
        site.operand,
        site.text,
        discarded_by="torch.where on line 3",
    )
    masked = SiteOutcome(branch, False, "finite", "backward", operand=torch.zeros(3))
    assert "discarded by torch.where on line 3" in _why_unbroken(masked, 7)
    assert "in run 7" in _why_unbroken(masked, 7)


def test_a_search_whose_operand_is_never_a_tensor_stops_once_every_move_had_its_turn(tmp_path):
    # Accuracy over a slice of a labels tensor: the divisor is a size (a Python int), which no
    # value the search moves can change; it used to cost GIVE_UP_AFTER runs of the whole program.
    text = (
        "import torch\n"
        "labels = torch.randint(0, 10, (100,))\n"
        "scores = torch.randn(100, 10, requires_grad=True)\n"
        "test_y = labels[:20]\n"
        "pred = torch.max(scores[:20], 1)[1]\n"
        "accuracy = torch.sum(pred == test_y).float() / test_y.size(0)\n"
    )
    prog = script(tmp_path, "acc.py", text)
    site = site_at(
        tmp_path / "acc.py",
        text,
        "torch.sum(pred == test_y).float() / test_y.size(0)",
        "torch.Tensor.__truediv__",
    )
    tracer = record(prog, [site])
    s = Search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=60.0, seed=0), None)
    report = s.run()
    assert report.found is None and report.stalled
    assert s.runner.measured == 0 and s.runner.reached >= UNMEASURED_AFTER
    assert report.iterations < GIVE_UP_AFTER // 2, report.note
    assert "the operand was never a tensor the search could measure" in report.note


def test_a_witness_with_fields_a_later_version_added_still_loads():
    # A reproducer committed to a repository embeds its witness as JSON; an older grist-lsp
    # running it ignores what it does not know instead of failing the test with a TypeError.
    w = Witness(
        entry="script:a.py", inputs={}, weights_moved={}, operand=None, result="nan", names={"k": "x"}
    )
    d = {**to_json(w), "added_later": {"anything": 1}}
    assert witness_from_json(d) == w


def test_mutations_cover_shapes_labels_and_masks():
    ex = {"x": torch.randn(4, 3), "y": torch.tensor([0, 2, 1, 0]), "m": torch.ones(4, dtype=torch.bool)}
    names = [n for n, _ in mutations(ex, "var", {"x": 100.0})]
    assert names[0] == "batch of 1"
    labels = {f"{LABEL_MUTATION}y all {c}" for c in (0, 1, 2)}
    assert {"all zeros", "identical rows", "m all False", "m all True"} | labels <= set(names)
    one = dict(mutations(ex, "var", {"x": 100.0}))["batch of 1"]
    assert [tuple(v.shape) for v in one.values()] == [(1, 3), (1,), (1,)]


def test_witness_values_round_trip_inline_and_through_a_payload(tmp_path, monkeypatch):
    monkeypatch.setenv("GRIST_CACHE_DIR", str(tmp_path))
    small = torch.tensor([[1.5, -0.0], [3.0, 2.0**-100]])
    tv = to_value(small)
    assert tv.values == [[1.5, -0.0], [3.0, 2.0**-100]] and tv.file is None
    assert torch.equal(from_value(tv), small)
    big = torch.randn(INLINE_LIMIT + 1, dtype=torch.float64)
    tb = to_value(big)
    assert tb.values is None and tb.file and Path(tb.file).parent == tmp_path / "payloads"
    assert torch.equal(from_value(tb), big)
    assert from_value(to_value(3)) == 3 and from_value(to_value(True)) is True


def test_shrink_keeps_one_failing_row_and_rounds():
    values = {"x": torch.tensor([[0.3, 0.7], [-2.345678, 0.1], [0.5, 0.5]])}

    def fails(v):
        return bool((v["x"] < -1).any())

    out = shrink(values, fails)
    assert out["x"].tolist() == [[-2.0, 0.0]]


def _witness(entry: str, inputs: dict, seed: int = 0) -> Witness:
    return Witness(
        entry=entry,
        inputs={k: to_value(v) for k, v in inputs.items()},
        weights_moved={},
        operand=None,
        result="-inf",
        seed=seed,
    )


def test_replay_reproduces_and_a_fixed_line_still_counts_as_the_site(tmp_path):
    path = tmp_path / "fixme.py"
    text = "import torch\n\n\ndef f(x):\n    return torch.log(x)\n"
    path.write_text(text)
    site = site_at(path, text, "torch.log(x)", "torch.log", "f")
    w = _witness(f"probe:{path}:f", {"x": torch.tensor([0.0, 1.0])})
    r = replay(site, w)
    assert (r.reproduced, r.result) == (True, "-inf")
    fixed = text.replace("torch.log(x)", "torch.log(x.clamp_min(1e-8))")
    r = replay(site, w, fixed)
    assert (r.reproduced, r.result) == (False, "finite")
    gone = text.replace("torch.log(x)", "x")
    assert replay(site, w, gone).result == "not-reached"


def test_replay_of_a_script_witness_substitutes_the_keyed_factory(tmp_path):
    path = tmp_path / "s.py"
    text = "import torch\nx = torch.randn(3)\ny = torch.sqrt(x)\n"
    path.write_text(text)
    site = site_at(path, text, "torch.sqrt(x)", "torch.sqrt")
    assert (
        replay(
            site, _witness(f"script:{path}", {"s.py:2:torch.randn#0": torch.tensor([1.0, -4.0, 9.0])})
        ).result
        == "nan"
    )
    assert not replay(
        site, _witness(f"script:{path}", {"s.py:2:torch.randn#0": torch.tensor([1.0, 4.0, 9.0])})
    ).reproduced


def test_cancel_stops_the_engine_and_leaves_the_verdicts_alone(tmp_path):
    path = tmp_path / "slow.py"
    text = "import torch, time\ntime.sleep(600)\ny = torch.log(torch.randn(3))\n"
    path.write_text(text)
    v = Verdict(
        site_at(path, text, "torch.log(torch.randn(3))", "torch.log"), Status.POSSIBLE, reason="static"
    )
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    out = confirm(str(path), text, [v], EngineOptions(budget=1.0, timeout=600.0), cancel=cancel)
    assert out == [v]


def test_entry_spec_errors_name_the_problem(tmp_path):
    with pytest.raises(E.EntryError, match="expected 'path/to/file.py:function'"):
        E.parse_entry("model.py", str(tmp_path))
    with pytest.raises(E.EntryError, match="not found"):
        E.parse_entry("nowhere.py:make", str(tmp_path))
    assert E.is_script("import torch\nx = torch.randn(3)\n")
    assert not E.is_script('"""doc"""\nimport torch\nEPS = 1e-8\n\ndef f(x):\n    return x\n')


def test_buffers_and_module_constants_are_not_inputs(tmp_path):
    path = tmp_path / "buffers.py"
    text = (
        "import torch\nimport torch.nn as nn\n\nTABLE = torch.arange(1.0, 5.0)\n\n\n"
        "class Scaled(nn.Module):\n"
        "    example_input_array = torch.ones(2, 4)\n\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.register_buffer('scale', torch.full((4,), 2.0))\n\n"
        "    def forward(self, x):\n"
        "        return x / self.scale / TABLE\n"
    )
    path.write_text(text)
    target = str(path.resolve())
    progs = [p for p in E.probe_programs(str(path), text, 0) if p.qualname == "Scaled"]
    # Lightning's example_input_array comes first, then shapes guessed from the layers.
    assert [tuple(v.shape) for _, v, _ in progs[0].inputs] == [(2, 4)]
    prog = progs[0]
    prog.produce_only(prog.setup)
    s1 = site_at(path, text, "x / self.scale", "torch.Tensor.__truediv__")
    tracer = record(prog, [s1])
    assert list(tracer.recorded) == ["x"]  # neither the buffer nor TABLE
    report = search(prog, s1, [s1], dict(tracer.recorded), SearchSettings(budget=0.5, seed=0))
    assert report.found is None
    assert target == prog.target_file


def test_gradients_reach_through_the_users_no_grad_blocks(tmp_path):
    text = (
        "import torch\n\n\n@torch.no_grad()\ndef predict(model, x):\n"
        "    return torch.log(torch.softmax(model(x), dim=1))\n\n\n"
        "model = torch.nn.Linear(6, 3)\n"
        "with torch.no_grad():\n    print(predict(model, torch.randn(5, 6)))\n"
        "    for p in model.parameters():\n        p -= 0.1 * p  # torch's real no_grad is needed here\n"
    )
    prog = script(tmp_path, "infer.py", text)
    site = site_at(tmp_path / "infer.py", text, "torch.log(torch.softmax(model(x), dim=1))", "torch.log")
    tracer = record(prog, [site])
    report = search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=20.0, seed=0))
    # Found by a move that needs the gradient (a signed step, or a Newton step landing the softmax at 0).
    assert report.found is not None and (
        report.found.how == "gradient step" or "Newton" in report.found.how
    ), report.note
    assert torch.no_grad.__module__.startswith("torch")  # the swap is undone after each run


def test_explicit_entry_with_kwargs_names_every_argument(tmp_path):
    path = tmp_path / "ent.py"
    text = (
        "import torch\n\n\ndef scale(x, eps=1e-3, *, temperature):\n"
        "    return x / (x.norm() * temperature + eps)\n\n\n"
        "def make():\n    return scale, (torch.ones(3),), {'eps': 0.0, 'temperature': torch.tensor([0.5, 2.0, 1.0])}\n"
    )
    path.write_text(text)
    target = str(path.resolve())
    prog = E.EntryProgram(
        label=f"entry:{target}:make",
        target_file=target,
        texts={target: text},
        user_files=frozenset({target}),
        entry_file=target,
        function="make",
        text=text,
    )
    prog.produce_only(prog.setup)
    site = site_at(path, text, "x / (x.norm() * temperature + eps)", "torch.Tensor.__truediv__")
    tracer = record(prog, [site])
    assert set(tracer.recorded) == {"x", "eps", "temperature"} and tracer.recorded["eps"] == 0.0
    report = search(prog, site, [site], dict(tracer.recorded), SearchSettings(budget=20.0, seed=0))
    assert report.found is not None and report.found.outcome.result in ("nan", "inf")
    # Replay from the witness's own words: the entry label and the named inputs.
    w = Witness(
        entry=prog.label,
        inputs={k: to_value(v) for k, v in report.found.values.items()},
        weights_moved={},
        operand=None,
        result=report.found.outcome.result,
    )
    assert replay(site, w).reproduced


class _FakeClockWorker:
    """A worker for one site of a training program, with training runs and searches replaced:
    ``train_report(steps)`` says how each training run ends (it takes all the steps it is given),
    and each search slice takes all of its runs and breaks nothing (a paused one goes on, unless
    what it keeps, ``held``, is too large). ``cost`` adds up what they used, in runs (a training
    step at the rate of ``budget``)."""

    def __init__(self, tmp_path: Path, monkeypatch, train_report, held: int = 0) -> None:
        from grist_lsp.dynamic import worker as W
        from grist_lsp.dynamic.budget import RUNS_PER_SECOND, STEPS_PER_SECOND, runs_for
        from grist_lsp.dynamic.search import SearchReport

        text = "import torch\nx = torch.rand(3)\nfor _ in range(10):\n    y = torch.log(x + 1)\n"
        path = tmp_path / "prog.py"
        path.write_text(text, encoding="utf-8")
        self.site = site_at(path, text, "torch.log(x + 1)", "torch.log")
        self.cost = 0.0
        self.training_runs = 0
        self.searches_made = 0
        fake = self

        def train_search(program, sites, todo, settings):
            fake.training_runs += 1
            report = train_report(settings.max_steps)
            fake.cost += report.steps * RUNS_PER_SECOND / STEPS_PER_SECOND
            return report

        class Runner:
            iterations = 0

        class Search:
            resumable = True

            def __init__(self, program, site, sites, examples, settings, deadline):
                self.budget = settings.budget
                self.runner = Runner()
                fake.searches_made += 1

            def held(self):
                return held

            def run(self):
                return self.resume(self.budget)

            def resume(self, seconds):
                self.runner.iterations += runs_for(seconds)
                fake.cost += runs_for(seconds)
                return SearchReport(None, self.runner.iterations, seconds, 1.0, "searched 5 runs")

        monkeypatch.setattr(W, "train_search", train_search)
        monkeypatch.setattr(W, "Search", Search)
        self.sent: list = []
        self.worker = W.Worker(
            {"path": str(path), "text": text, "targets": [to_json(self.site)], "budget": 5.0},
            self.sent.append,
        )
        training_program = type("Training", (), {"label": "script:prog.py", "trains": True})()
        assignment = W.Assignment(training_program, {}, None)
        monkeypatch.setattr(self.worker, "assign", lambda keys, **_: {self.site.key: assignment})

    def run(self) -> list:
        """The site reports the worker sent."""
        from grist_lsp.dynamic.protocol import SiteReport

        self.worker.run()
        return [m for m in self.sent if isinstance(m, SiteReport)]


@pytest.mark.parametrize("held", [0, 10**9])
def test_a_site_nothing_breaks_costs_one_budget_however_it_was_spent(tmp_path, monkeypatch, held):
    """Training runs, the short searches between them and the per-site searches after them
    together stay within ``--budget`` (in runs: ``budget.runs_for``) for a site none of them
    breaks (each run takes all the steps or runs it is given). The site's search pauses between
    its slices and goes on, unless what it would keep is too large: then each slice starts afresh."""
    from grist_lsp.dynamic import worker as W
    from grist_lsp.dynamic.budget import runs_for
    from grist_lsp.dynamic.training import TrainingReport

    def stopped_by_its_budget(steps: int) -> TrainingReport:
        return TrainingReport(None, steps, 0.0, f"stopped after {steps} training steps", out_of_steps=True)

    fake = _FakeClockWorker(tmp_path, monkeypatch, stopped_by_its_budget, held)
    reports = fake.run()

    assert runs_for(5.0) - W.MIN_RUNS <= fake.cost <= runs_for(5.0), f"the site cost {fake.cost} runs"
    assert [(r.key, r.witness) for r in reports] == [(fake.site.key, None)]
    assert "searched 5 runs" in reports[0].note
    assert fake.training_runs == sum(turn == "train" for turn, _ in W.TURNS)
    # the short searches between training runs, then the two slices of the per-site search
    slices = sum(turn == "search" for turn, _ in W.TURNS) + 2
    assert fake.searches_made == (1 if held <= W.PAUSED_ELEMENTS else slices)


@pytest.mark.parametrize("steered", [False, True])
def test_a_training_run_that_ended_before_its_time_is_not_run_again_for_the_same_site(
    tmp_path, monkeypatch, steered
):
    """A training run is seeded and deterministic: one that ended on its own (the program
    ended, or a site found before failed first) would end the same way in every later turn, so
    its turns go to the site's search instead."""
    from grist_lsp.dynamic.budget import runs_for
    from grist_lsp.dynamic.training import TrainingReport

    def ended(steps: int) -> TrainingReport:
        return TrainingReport(None, 356, 0.0, "line 9 (torch.log) failed first", steered=steered)

    fake = _FakeClockWorker(tmp_path, monkeypatch, ended)
    reports = fake.run()

    assert fake.training_runs == 1
    assert [(r.key, r.witness) for r in reports] == [(fake.site.key, None)]
    assert fake.cost <= runs_for(5.0)


def test_the_progress_line_names_a_site_by_its_one_based_column_as_the_report_does(tmp_path):
    text = "import torch\nx = torch.rand(3)\ny = torch.log(x)\n"
    site = site_at(tmp_path / "p.py", text, "torch.log(x)", "torch.log")
    seen: list[str] = []
    lines = _SiteLines({site.key: site}, 1, lambda message, fraction: seen.append(message))
    lines(SiteReport(key=site.key, witness=None, entry=None, note="searched"))
    # The report prints p.py:3:5 for this site (the core's column is 4, 0-based).
    assert seen == ["searched 3:5 torch.log (1/1)"]


NUMPY_LOOP = """\
import numpy as np
import torch

rng = np.random.default_rng(0)
for step in range(500):
    batch = torch.from_numpy(rng.normal(size=(64, 8)).astype(np.float32))
    score = torch.log(torch.sigmoid(batch)).mean()
"""


def test_what_a_recording_run_keeps_of_a_loop_without_backward_does_not_grow_with_its_iterations(tmp_path):
    """A batch made anew in each of 500 iterations: only the first MAX_OCCURRENCES are inputs."""
    from grist_lsp.dynamic.tracing import MAX_OCCURRENCES

    prog = script(tmp_path, "score.py", NUMPY_LOOP)
    site = site_at(tmp_path / "score.py", NUMPY_LOOP, "torch.log(torch.sigmoid(batch))", "torch.log")
    tracer, _, error = prog.run(prog.tracer_config(sites=[site], record=True))
    assert error is None, error
    assert site.key in tracer.reached
    assert 1 <= len(tracer.recorded) <= MAX_OCCURRENCES, len(tracer.recorded)
    assert len(tracer.used_inputs) <= MAX_OCCURRENCES


def test_vjp_is_autograds_product_and_imports_no_sympy_in_a_fresh_process():
    from grist_lsp.dynamic.tracing import vjp

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    out = torch.log(x.abs() + 1) * x
    upstream = torch.randn(3, 4, dtype=torch.float64)
    (expected,) = torch.autograd.grad(out, x, upstream, retain_graph=True)
    (got,) = vjp([out], [x], [upstream])
    assert torch.allclose(got, expected)
    # What the change is for: torch imports sympy for explicit grad_outputs, and vjp must not.
    code = (
        "import sys, torch\n"
        "from grist_lsp.dynamic.tracing import vjp\n"
        "x = torch.randn(5, requires_grad=True)\n"
        "vjp([x.exp()], [x], [torch.ones(5)])\n"
        "print('sympy' in sys.modules)\n"
    )
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_clock_cap_of_a_slice_of_a_few_runs_is_never_below_its_floor():
    from grist_lsp.dynamic.budget import CLOCK_CAP, CLOCK_FLOOR, clock_cap

    assert clock_cap(0.02) == pytest.approx(CLOCK_CAP * 0.02 + CLOCK_FLOOR)
    assert clock_cap(0.02) >= CLOCK_FLOOR > 0
    assert clock_cap(5.0) == pytest.approx(CLOCK_CAP * 5.0 + CLOCK_FLOOR)


def test_a_label_mutation_sets_every_occurrence_of_one_place_at_once():
    """Labels drawn in each of 64 iterations are 64 inputs of one line: each class is one mutation
    of all of them, not 64 (a search would spend its runs on them before its gradient)."""
    ex = {f"loop.py:9:torch.randint#{n}": torch.tensor([0, 3, 1]) for n in range(64)}
    ex["loop.py:4:torch.rand#0"] = torch.rand(3, 4)
    labels = [
        (n, v)
        for n, v in mutations(ex, "log", {"loop.py:4:torch.rand#0": 100.0})
        if n.startswith(LABEL_MUTATION)
    ]
    assert [n for n, _ in labels] == [f"{LABEL_MUTATION}loop.py:9:torch.randint#0 all {c}" for c in range(4)]
    for c, (_, values) in enumerate(labels):
        assert all(bool((values[f"loop.py:9:torch.randint#{n}"] == c).all()) for n in range(64))


REWRAPPED = """\
import torch
z = torch.rand(2, 3, requires_grad=True)
for step in range(300):
    z = torch.autograd.Variable(z, requires_grad=True)
    p = torch.softmax(z, dim=1)
"""


def test_a_weight_rewrapped_each_iteration_is_one_weight_of_the_run(tmp_path):
    """``Variable(z, requires_grad=True)`` makes a new leaf of z's memory every iteration: one key,
    so a move of it applies in every iteration and the run keeps no tensor per iteration."""
    prog = script(tmp_path, "rewrap.py", REWRAPPED)
    tracer, _, error = prog.run(prog.tracer_config(sites=[]))
    assert error is None, error
    assert len(tracer._params) == 1 and tracer.free_params() == {"param#0"}


QUIET_LOOP = """\
import torch
x = torch.rand(8)
while True:
    x = torch.sin(x) + 0.5
"""


def test_a_run_of_an_endless_loop_that_meets_no_watched_site_stops_by_its_count_of_calls(tmp_path):
    """A script that imports the checked module loops for ever and meets none of the module's
    sites: no round to count, so a run of it (``run:``, ``RunProgram.quiet_calls``) stops after
    QUIET_CALLS torch calls without a new site, not at the timeout."""
    from grist_lsp.dynamic.tracing import QUIET_CALLS

    text = QUIET_LOOP + "y = torch.log(x)\n"
    prog = script(tmp_path, "quiet.py", text)
    site = site_at(tmp_path / "quiet.py", text, "torch.log(x)", "torch.log")
    assert prog.quiet_calls is None  # a script's own endless loop is a hang to report
    importer = E.RunProgram(
        label="run:main.py",
        target_file=prog.target_file,
        texts={},
        user_files=frozenset(),
        script_file="main.py",
    )
    assert importer.quiet_calls == QUIET_CALLS
    tracer, outcome, error = prog.run(prog.tracer_config(sites=[site], quiet_calls=QUIET_CALLS))
    assert (outcome, error) == (None, None)
    assert site.key not in tracer.reached and tracer._quiet_calls == QUIET_CALLS + 1


def test_two_empty_weights_are_two_weights():
    """An empty tensor has no memory to share (its address may be 0): never another's alias."""
    from grist_lsp.dynamic.tracing import _view_of

    z = torch.rand(3, requires_grad=True)
    assert _view_of(z) == _view_of(torch.autograd.Variable(z, requires_grad=True))
    assert _view_of(torch.zeros(0, requires_grad=True)) != _view_of(torch.zeros(0, requires_grad=True))


def test_a_weight_at_another_weights_old_address_is_a_weight_of_its_own() -> None:
    """``module.cuda()`` (``.half()``, ``.to()``) gives each parameter new memory (``p.data = ...``);
    a later weight allocated at a moved one's old address used to be taken for it, so the
    weights' keys depended on the allocator, and a witness's weight moves went to the wrong
    tensors when replayed. Here the later weight is given that old memory on purpose."""
    from grist_lsp.dynamic.tracing import Tracer, TracerConfig, trace_call

    def body() -> None:
        first = torch.nn.Parameter(torch.randn(3, 3))
        torch.abs(first)  # met: the first weight
        old = first.data
        first.data = first.data.clone()  # as Module._apply does
        second = torch.nn.Parameter(old)  # the old address, shape and strides
        torch.abs(second)
        torch.abs(first)

    tracer = Tracer(TracerConfig(target_file=__file__, texts={}, sites=[], user_files=frozenset({__file__})))
    trace_call(tracer, body)
    assert sorted(key for _, key in tracer._params.values()) == ["param#0", "param#1"]


def test_a_search_kept_within_the_programs_range_keeps_its_mutations_there_too(tmp_path):
    """Issue 37, item 6: the follow-up search for a witness a maintainer believes keeps every input
    within the range the program gave it. Its mutations did not: "all ones" on a ``torch.rand``
    input (at most 0.9998 here) is past that range, and the follow-up threw its witness away. Held
    within it, the mutation still empties the positives (no target above 0.5), a real witness."""
    text = (
        "import torch\n"
        "torch.manual_seed(0)\n"
        "targets = (torch.rand(2, 50) < 0.1).float()\n"
        "loss = torch.ones(2, 50) * 0.3\n"
        "num_pos = (targets > 0.5).sum()\n"
        "print(loss.sum() / num_pos)\n"
    )
    prog = script(tmp_path, "positives.py", text)
    site = site_at(tmp_path / "positives.py", text, "loss.sum() / num_pos", "torch.Tensor.__truediv__")
    examples = dict(record(prog, [site]).recorded)
    kept = SearchSettings(budget=1.0, seed=0, bound_factor=1.0, within_examples=True)
    report = Search(prog, site, [site], examples, kept, None).run()
    assert report.found is not None, report.note
    for key, value in report.found.values.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and key in examples:
            assert float(value.abs().max()) <= float(examples[key].abs().max()), (key, value)
