"""The dynamic engine end to end: worker subprocesses, witnesses that replay in a fresh process.

Sites are built by hand from snippets of the programs in tests/corpus/engine/, so these tests
do not move when the static pass changes; one test uses ``analyze_source`` as the CLI does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from grist_lsp.analyzer.catalogue import KINDS, lookup
from grist_lsp.dynamic.engine import confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.model import Site, Span, Status, Verdict, to_json

CORPUS = Path(__file__).parent / "corpus" / "engine"
FAST = dict(budget=1.5, timeout=20.0, seed=0)


def site_at(path: Path, snippet: str, op: str, text: str | None = None) -> Site:
    """The Site of ``snippet`` (first occurrence) in the file, as the static pass would give it."""
    text = path.read_text() if text is None else text
    for i, line in enumerate(text.splitlines(), start=1):
        col = line.find(snippet)
        if col >= 0:
            row = lookup(op)[0]
            return Site(
                str(path), Span(i, col, i, col + len(snippet)), op, row.kind, row.operand_keyword, snippet
            )
    raise AssertionError(f"{snippet!r} not in {path}")


def possible(path: Path, *specs: tuple[str, str], text: str | None = None) -> list[Verdict]:
    return [
        Verdict(site_at(path, s, op, text), Status.POSSIBLE, reason="static: not proved safe")
        for s, op in specs
    ]


def by_text(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.site.text: v for v in verdicts if v.site.op}


def replay_in_fresh_process(*verdicts: Verdict) -> list[dict]:
    """Run replay() for each verdict in one brand-new interpreter, as a reproducer would."""
    code = (
        "import json, sys\n"
        "from grist_lsp.model import site_from_json, witness_from_json\n"
        "from grist_lsp.dynamic.replay import replay\n"
        "out = []\n"
        "for d in json.load(sys.stdin):\n"
        "    r = replay(site_from_json(d['site']), witness_from_json(d['witness']))\n"
        "    out.append({'reproduced': r.reproduced, 'result': r.result, 'detail': r.detail})\n"
        "print(json.dumps(out))\n"
    )
    payload = json.dumps([{"site": to_json(v.site), "witness": to_json(v.witness)} for v in verdicts])
    out = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


REPLAYED = [
    ("train", "torch.log(p)"),
    ("models", "torch.sqrt(self.var(h))"),
    ("var", "h.var(dim=0)"),
    ("var", "x / x.sum(dim=1, keepdim=True)"),
    ("entry", "dot / (a.norm(dim=-1) * b.norm(dim=-1))"),
    ("backward", "torch.sqrt(d2)"),
    ("pytest", "torch.log(p / q)"),
    ("buffer", "torch.log(x)"),
    ("models", "logits / self.temperature"),
    ("masked", 'scores.masked_fill(~mask, float("-inf")).softmax(-1)'),
]


@pytest.fixture(scope="module")
def replays(results) -> dict[tuple[str, str], dict]:
    """Every confirmed witness of the corpus replayed once more, in one fresh process."""
    verdicts = [by_text(results[name])[text] for name, text in REPLAYED]
    assert all(v.status is Status.CONFIRMED for v in verdicts), [(v.site.text, v.reason) for v in verdicts]
    return dict(zip(REPLAYED, replay_in_fresh_process(*verdicts)))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, list[Verdict]]:
    """Every corpus program confirmed once (two at a time: the machine is shared)."""
    jobs = {
        "train": (
            CORPUS / "train_script.py",
            [
                ("torch.log(p)", "torch.log"),
                ("torch.log(p + 1e-10)", "torch.log"),
                ("torch.exp(logits - logits.max(dim=1, keepdim=True).values)", "torch.exp"),
            ],
            {},
        ),
        "models": (
            CORPUS / "models.py",
            [
                ("torch.sqrt(self.var(h))", "torch.sqrt"),
                ("torch.sqrt(F.softplus(self.var(h)) + 1e-6)", "torch.sqrt"),
                ("x.std(dim=0)", "torch.Tensor.std"),
                ("x.std(dim=0, correction=0)", "torch.Tensor.std"),
                ("logits / self.temperature", "torch.Tensor.__truediv__"),
            ],
            {},
        ),
        "entry": (
            CORPUS / "entry_model.py",
            [
                ("dot / (a.norm(dim=-1) * b.norm(dim=-1))", "torch.Tensor.__truediv__"),
                ("dot / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-8)", "torch.Tensor.__truediv__"),
            ],
            {"entries": [str(CORPUS / "entry_model.py") + ":make"]},
        ),
        "upstream": (
            CORPUS / "upstream.py",
            [("torch.log(x)", "torch.log"), ("torch.exp(z)", "torch.exp")],
            {},
        ),
        "backward": (
            CORPUS / "backward.py",
            [
                ("torch.sqrt(d2)", "torch.sqrt"),
                ("torch.sqrt(d2 + 1e-12)", "torch.sqrt"),
            ],
            {},
        ),
        "masked": (
            CORPUS / "masked_softmax.py",
            [
                ('scores.masked_fill(~mask, float("-inf")).softmax(-1)', "torch.Tensor.softmax"),
                ('torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)', "torch.softmax"),
            ],
            {},
        ),
        "var": (
            CORPUS / "var_script.py",
            [
                ("h.var(dim=0)", "torch.Tensor.var"),
                ("x / x.sum(dim=1, keepdim=True)", "torch.Tensor.__truediv__"),
            ],
            {},
        ),
    }

    # A second run of one program, for determinism, and two projects written on the fly.
    jobs["upstream-again"] = jobs["upstream"]
    project = tmp_path_factory.mktemp("project")
    write_test_project(project)
    jobs["pytest"] = (
        project / "lossmod.py",
        [("torch.log(p / q)", "torch.log")],
        {"project_root": str(project)},
    )
    buffer = tmp_path_factory.mktemp("buffer") / "buf.py"
    buffer.write_text("import torch\n\n\ndef f(x):\n    return torch.log(x.clamp_min(1e-6))\n")
    jobs["buffer"] = (buffer, [("torch.log(x)", "torch.log")], {"text": UNSAVED})

    def one(name: str) -> tuple[str, list[Verdict]]:
        path, specs, extra = jobs[name]
        extra = dict(extra)
        text = extra.pop("text", None) or path.read_text()
        return name, confirm(
            str(path), text, possible(path, *specs, text=text), EngineOptions(**{**FAST, **extra})
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, jobs))


# The editor's buffer has two more lines and an unguarded log: positions must follow the buffer.
UNSAVED = "import torch\n\n# draft\n# draft\n\ndef f(x):\n    return torch.log(x)\n"


def write_test_project(root: Path) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "lossmod.py").write_text(
        "import torch\n\n\ndef kl(p, q):\n    return (p * torch.log(p / q)).sum()\n"
    )
    (root / "tests").mkdir()
    (root / "tests" / "test_lossmod.py").write_text(
        "import torch\nfrom lossmod import kl\n\n\n"
        "def test_kl_is_non_negative():\n"
        "    logits = torch.randn(3, 5)\n"
        "    p = torch.softmax(logits, dim=1)\n"
        "    q = torch.softmax(torch.randn(3, 5), dim=1)\n"
        "    assert kl(p, q) >= 0\n"
    )


def test_training_script_confirms_log_of_softmax_and_stops_the_loop(results, replays):
    v = by_text(results["train"])
    bug = v["torch.log(p)"]
    assert bug.status is Status.CONFIRMED, bug.reason
    assert bug.site.span.start_line == 19
    w = bug.witness
    assert w.entry == f"script:{CORPUS / 'train_script.py'}"
    assert w.replayed and w.result == "-inf" and w.phase == "forward"
    assert "torch.log receives 0 when x = " in bug.message
    # The input is the loop's torch.randn, keyed by file, line and occurrence.
    assert (
        list(w.inputs) == ["train_script.py:28:torch.randn#0"]
        or "train_script.py:28:torch.randn#0" in w.inputs
    )
    assert (
        w.input_bound
        and max(abs(x) for row in w.inputs["train_script.py:28:torch.randn#0"].values for x in row)
        <= w.input_bound
    )
    assert replays[("train", "torch.log(p)")] == {
        "reproduced": True,
        "result": "-inf",
        "detail": bug_detail(bug),
    }


def bug_detail(v: Verdict) -> str:
    # A fully masked softmax row is fed -inf on purpose; every other kind needs finite operands.
    masked = bool(KINDS[v.site.kind].region.inf_operands)
    operands = "operands with the program's own infinities" if masked else "finite operands"
    return f"{v.site.op} produced {v.witness.result} from {operands}"


def test_safe_twins_are_never_confirmed(results):
    safe = {
        "train": ["torch.log(p + 1e-10)", "torch.exp(logits - logits.max(dim=1, keepdim=True).values)"],
        "models": ["torch.sqrt(F.softplus(self.var(h)) + 1e-6)", "x.std(dim=0, correction=0)"],
        "entry": ["dot / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-8)"],
        "backward": ["torch.sqrt(d2 + 1e-12)"],
        "masked": ['torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)'],
    }
    for name, texts in safe.items():
        v = by_text(results[name])
        for t in texts:
            assert v[t].status is Status.POSSIBLE, (name, t, v[t].message)
            assert "searched" in v[t].reason  # the engine did look, within its budget


def test_module_is_probed_without_an_entry(results, replays):
    v = by_text(results["models"])
    sqrt = v["torch.sqrt(self.var(h))"]
    assert sqrt.status is Status.CONFIRMED, sqrt.reason
    assert sqrt.witness.entry == f"probe:{CORPUS / 'models.py'}:GaussianHead"
    assert sqrt.witness.result == "nan" and sqrt.witness.replayed
    # Nothing in the file calls it: the inputs were made up, and the user is told so.
    assert "found by a probe (synthesized inputs)" in sqrt.message
    assert "probe (synthesized inputs) probe:" in sqrt.reason
    assert (
        list(sqrt.witness.inputs) == ["h"] and sqrt.witness.inputs["h"].shape[-1] == 8
    )  # from nn.Linear(8, 4)
    assert sqrt.witness.operand.values is not None and min(min(r) for r in sqrt.witness.operand.values) < 0
    assert replays[("models", "torch.sqrt(self.var(h))")]["reproduced"]


def test_a_bug_only_weights_reach_moves_them_within_bounds_and_says_so(results, replays):
    v = by_text(results["models"])["logits / self.temperature"]
    assert v.status is Status.CONFIRMED, v.reason
    w = v.witness
    assert list(w.weights_moved) == ["LearnedTemperature.temperature"]
    assert 0 < w.weights_moved["LearnedTemperature.temperature"] <= 10.0  # within max(1, 10|w|) of 1.0
    assert list(w.weight_deltas) == ["param#0"]
    assert "weights moved (LearnedTemperature.temperature by up to" in v.message
    assert replays[("models", "logits / self.temperature")]["reproduced"]


def test_std_of_a_batch_of_one_is_found_by_shape_search(results, replays):
    std = by_text(results["models"])["x.std(dim=0)"]
    assert std.status is Status.CONFIRMED, std.reason
    assert std.witness.inputs["x"].shape[0] == 1
    assert std.witness.operand.shape[0] == 1
    assert "one element" in std.message
    var = by_text(results["var"])["h.var(dim=0)"]
    assert var.status is Status.CONFIRMED, var.reason
    assert var.witness.entry.startswith("script:") and var.witness.operand.shape[0] == 1
    assert replays[("var", "h.var(dim=0)")]["reproduced"]


def test_division_by_an_exact_zero(results, replays):
    v = by_text(results["var"])["x / x.sum(dim=1, keepdim=True)"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.result in ("nan", "inf", "-inf")
    assert replays[("var", "x / x.sum(dim=1, keepdim=True)")]["reproduced"]


def test_fully_masked_softmax_row_is_found_by_an_all_false_mask(results, replays):
    """-inf scores are the program's intent, not an upstream failure: the oracle accepts them
    and blames the softmax for the NaN of a row with no unmasked key."""
    text = 'scores.masked_fill(~mask, float("-inf")).softmax(-1)'
    v = by_text(results["masked"])[text]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.site.span.start_line == 7 and v.site.kind == "softmax"
    w = v.witness
    assert w.result == "nan" and w.phase == "forward" and w.replayed
    mask = w.inputs["masked_softmax.py:17:torch.tensor#0"]
    assert mask.dtype == "bool" and not any(all(row) for row in mask.values)  # ~mask all True somewhere
    assert "a row that is entirely -inf" in v.message
    assert replays[("masked", text)] == {"reproduced": True, "result": "nan", "detail": bug_detail(v)}


def test_explicit_entry_is_used_and_named(results, replays):
    v = by_text(results["entry"])["dot / (a.norm(dim=-1) * b.norm(dim=-1))"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.entry == f"entry:{CORPUS / 'entry_model.py'}:make"
    assert set(v.witness.inputs) <= {"a", "b"} and v.witness.inputs
    assert replays[("entry", "dot / (a.norm(dim=-1) * b.norm(dim=-1))")]["reproduced"]


def test_upstream_nan_is_blamed_upstream_only(results):
    v = by_text(results["upstream"])
    assert v["torch.log(x)"].status is Status.CONFIRMED
    assert v["torch.log(x)"].witness.result == "nan"
    # exp receives the NaN that log made: its operands are not finite, so it is not the culprit.
    assert v["torch.exp(z)"].status is Status.POSSIBLE


def test_backward_only_bug_is_reported_in_the_backward_phase(results, replays):
    v = by_text(results["backward"])["torch.sqrt(d2)"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.phase == "backward"
    assert "backward pass" in v.message
    assert replays[("backward", "torch.sqrt(d2)")]["reproduced"]


def test_pytest_test_is_an_entry(results, replays):
    v = by_text(results["pytest"])["torch.log(p / q)"]
    root = Path(v.site.file).parent
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.entry == f"test:{root / 'tests' / 'test_lossmod.py'}::test_kl_is_non_negative"
    assert any(k.startswith("test_lossmod.py:") for k in v.witness.inputs)
    assert replays[("pytest", "torch.log(p / q)")]["reproduced"]


def test_unsaved_buffer_is_what_runs(results, replays):
    (v,) = [v for v in results["buffer"] if v.site.op]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.site.span.start_line == 7
    # On disk the line is guarded: replaying against the disk's text does not reproduce.
    assert replays[("buffer", "torch.log(x)")]["reproduced"] is False


def test_same_seed_gives_the_same_witness(results):
    w1 = by_text(results["upstream"])["torch.log(x)"].witness
    w2 = by_text(results["upstream-again"])["torch.log(x)"].witness
    assert to_json(w1.inputs) == to_json(w2.inputs)
    assert (w1.iterations, w1.result, to_json(w1.operand)) == (w2.iterations, w2.result, to_json(w2.operand))


ERROR_CASES = [
    ("hang.py", "did not", 5, "timeout"),
    (
        "hang_native.py",
        "did not finish",
        7,
        "timeout",
    ),  # deaf to the worker's timer: the parent's deadline, located by faulthandler
    ("segfault.py", "segmentation fault", 6, "crash"),
    ("raises.py", "FileNotFoundError: data/train.pt", 5, "missing-data"),
    ("oom.py", "memory", 5, "memory"),
    ("importerr.py", "No module named 'not_a_real_module_grist'", 2, "import-error"),
    # argparse and a required option: what argparse said, and how to give the arguments
    (
        "needs_arguments.py",
        "needs command-line arguments (the following arguments are required: --data)",
        7,
        "needs-arguments",
    ),
    (
        "needs_arguments.py",
        '[tool.grist] script-args = {"needs_arguments.py" = ["--data", "..."]}',
        7,
        "needs-arguments",
    ),
]


@pytest.fixture(scope="module")
def broken() -> dict[str, list[Verdict]]:
    """The programs that cannot run, each confirmed with small limits (three at a time)."""

    def one(name: str) -> tuple[str, list[Verdict]]:
        path = CORPUS / name
        text = path.read_text()
        snippet = next(
            s for s in ("torch.log(x)", "torch.log(chunks[0])", "torch.log(torch.randn(3))") if s in text
        )
        opts = EngineOptions(budget=1.0, timeout=3.0 if name == "hang_native.py" else 6.0, memory_mb=1200)
        return name, confirm(str(path), text, possible(path, (snippet, "torch.log")), opts)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(one, sorted({c[0] for c in ERROR_CASES})))


@pytest.mark.parametrize("name, words, line, kind", ERROR_CASES)
def test_programs_that_cannot_run_give_an_error_verdict(broken, name, words, line, kind):
    path = CORPUS / name
    out = broken[name]
    errors = [v for v in out if v.status is Status.ERROR]
    assert len(errors) == 1, [v.message for v in out]
    assert words in errors[0].message
    assert errors[0].error_kind == kind
    assert errors[0].site.span.start_line == line
    assert str(path) in errors[0].message
    # The site itself stays possible: nothing was proved either way.
    assert [v.status for v in out if v.site.op] == [Status.POSSIBLE]


def test_static_verdicts_from_the_analyzer_flow_through(tmp_path):
    from grist_lsp.analyzer.analysis import analyze_source

    path = CORPUS / "train_script.py"
    text = path.read_text()
    verdicts = analyze_source(str(path), text)
    seen: list[tuple[str, float]] = []
    # Two workers share the sites; reproducers are written for what is confirmed.
    opts = EngineOptions(**{**FAST, "budget": 1.0, "jobs": 2, "write_reproducers": str(tmp_path)})
    out = confirm(str(path), text, verdicts, opts, progress=lambda m, f: seen.append((m, f)))
    assert len(out) == len(verdicts)
    for before, after in zip(verdicts, out):
        assert after.site == before.site
        if before.status is Status.SAFE:
            assert after == before  # safe verdicts are untouched
    confirmed = [v for v in out if v.status is Status.CONFIRMED]
    assert [(v.site.span.start_line, v.site.kind) for v in confirmed] == [(19, "log")]
    searched = sum(v.status is Status.POSSIBLE for v in verdicts)
    assert [f for m, f in seen if not m.startswith("replaying")][-1] == 1.0
    assert len([m for m, _ in seen if not m.startswith("replaying")]) == searched
    repro = Path(confirmed[0].witness.reproducer)
    assert repro.parent == tmp_path and repro.read_text() == confirmed[0].witness.reproducer_source


# Hand-written training scripts make their weights from factories; under search those factories'
# results are substituted, and the weights must still be leaves an optimizer accepts.
WEIGHT_SCRIPTS = {
    "scaled.py": (
        "import torch\n"
        "W = (0.1 * torch.randn(3, 2)).requires_grad_()\n"
        "opt = torch.optim.SGD([W], lr=0.1)\n"
        "x = torch.randn(4, 3)\n"
        "loss = torch.log(x @ W).sum()\n"
    ),
    "styles.py": (
        "import torch\n"
        "P = torch.nn.Parameter(torch.randn(3, 2))\n"
        "R = torch.randn(2, 2, requires_grad=True)\n"
        "U = 0.5 * torch.randn(2, 2)\n"
        "U.requires_grad = True\n"
        "opt = torch.optim.SGD([P, R, U], lr=0.1)\n"
        "x = torch.randn(4, 3)\n"
        "loss = torch.log(x @ P @ R @ U).sum()\n"
        "loss.backward()\n"
        "opt.step()\n"
    ),
}


def test_weights_made_trainable_from_factories_work_under_search(tmp_path):
    verdicts = []
    for name, text in WEIGHT_SCRIPTS.items():
        path = tmp_path / name
        path.write_text(text)
        lines = text.splitlines()
        log_line = next(i for i, ln in enumerate(lines, start=1) if "torch.log(" in ln)
        snippet = lines[log_line - 1].split("= ", 1)[1].removesuffix(".sum()")
        (v,) = confirm(str(path), text, possible(path, (snippet, "torch.log")), EngineOptions(**FAST))
        assert v.status is Status.CONFIRMED, v.reason
        assert v.site.span.start_line == log_line
        w = v.witness
        assert w.entry == f"script:{path}"
        # Only the data is an input: the values that initialise the weights are the weights' own.
        x_line = lines.index("x = torch.randn(4, 3)") + 1
        assert set(w.inputs) <= {f"{name}:{x_line}:torch.randn#0"}, w.inputs
        verdicts.append(v)
    assert [r["reproduced"] for r in replay_in_fresh_process(*verdicts)] == [True, True]


@pytest.mark.parametrize("seed", [0, 2])
def test_log_of_a_softmax_one_step_short_of_zero_is_landed(seed):
    # With these seeds the gradient steps alone stalled at q = 1.4e-45 (the smallest float32
    # subnormal): the gradient of a softmax that small underflows. The landing moves push the
    # logit gap until the probability is exactly 0.
    path = Path(__file__).parent / "corpus" / "programs" / "aliases_kl.py"
    (v,) = confirm(
        str(path),
        path.read_text(),
        possible(path, ("log(q)", "torch.log")),
        EngineOptions(**{**FAST, "seed": seed}),
    )
    assert v.status is Status.CONFIRMED, v.reason
    assert (v.site.span.start_line, v.witness.result) == (12, "-inf")
    assert "torch.log receives 0 when" in v.message
    assert replay_in_fresh_process(v)[0]["reproduced"]


def test_a_site_the_script_reaches_is_not_confirmed_by_a_probe_with_made_up_inputs():
    # The script passes Poisson counts (whole numbers >= 0): lgamma(counts + 1) never meets its
    # pole there. A probe of the function with synthesized (negative) counts would, but no caller
    # passes those: the probe searches only among the inputs callers pass, and the reason says so.
    path = Path(__file__).parent / "corpus" / "programs" / "negbin_loss.py"
    (v,) = confirm(
        str(path),
        path.read_text(),
        possible(path, ("torch.lgamma(counts + 1)", "torch.lgamma")),
        EngineOptions(**FAST),
    )
    assert v.site.span.start_line == 32
    assert v.status is Status.POSSIBLE, v.message
    assert "kept to inputs real callers pass (counts non-negative whole numbers" in v.reason, v.reason


def test_a_probe_for_a_site_real_callers_reach_searches_inside_their_domain():
    # The script only passes ReLU feature maps (>= 0) whose pooled shape never leaves one element
    # per variance; a probe reaches that shape, and keeps its values >= 0 as the callers' are.
    path = Path(__file__).parent / "corpus" / "programs" / "feature_statistics.py"
    (v,) = confirm(
        str(path),
        path.read_text(),
        possible(path, ("flat.std(-1)", "torch.Tensor.std")),
        EngineOptions(**FAST),
    )
    assert v.status is Status.CONFIRMED, v.reason
    assert v.site.span.start_line == 22
    assert v.witness.entry.startswith("probe:") and v.witness.entry.endswith(":style_statistics")
    feats = torch.tensor(v.witness.inputs["feats"].values)
    assert bool((feats >= 0).all()), feats
    assert replay_in_fresh_process(v)[0]["reproduced"]


def test_a_probe_witness_with_noise_the_forward_draws_replays_and_reproduces(tmp_path):
    # The forward draws torch.randn_like noise: the witness holds that noise by its key, and
    # the replay (and the reproducer, which goes through replay) substitutes it again instead
    # of passing it to forward() as an argument.
    path = CORPUS / "reparam.py"
    (v,) = confirm(
        str(path), path.read_text(), possible(path, ("torch.log(recon)", "torch.log")), EngineOptions(**FAST)
    )
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.entry.startswith("probe:") and v.witness.entry.endswith(":Reparam")
    assert any(k.endswith(":torch.randn_like#0") for k in v.witness.inputs), v.witness.inputs
    assert replay_in_fresh_process(v)[0]["reproduced"]
    from grist_lsp.dynamic.reproducer import write_reproducer

    test_file = write_reproducer(v.site, v.witness, str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout + run.stderr


def test_a_test_in_a_src_layout_reaches_the_file_and_its_constant_fills_are_data(tmp_path):
    # src/proj/heads.py is imported as proj.heads by tests/test_heads.py; the test's torch.ones
    # weights are data (all zero: 0 / 0), while the file's own torch.full_like epsilon is a
    # constant the search must never move.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\n')
    pkg = tmp_path / "src" / "proj"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    heads = pkg / "heads.py"
    heads.write_text(
        "import torch\n\n\n"
        "def weighted_nll(logits, weight):\n"
        "    p = torch.softmax(logits, -1)[:, 0]\n"
        "    nll = -torch.log(p + torch.full_like(p, 1e-6))\n"
        "    return (nll * weight).sum() / weight.sum()\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_heads.py").write_text(
        "import torch\nfrom proj.heads import weighted_nll\n\n\n"
        "def test_weighted():\n"
        "    assert torch.isfinite(weighted_nll(torch.randn(5, 3), torch.ones(5)))\n"
    )
    div, log = confirm(
        str(heads),
        heads.read_text(),
        possible(
            heads,
            ("(nll * weight).sum() / weight.sum()", "torch.Tensor.__truediv__"),
            ("torch.log(p + torch.full_like(p, 1e-6))", "torch.log"),
        ),
        EngineOptions(**FAST, project_root=str(tmp_path)),
    )
    assert div.status is Status.CONFIRMED, div.reason
    assert div.witness.entry.startswith("test:") and div.witness.entry.endswith("::test_weighted")
    assert any(":torch.ones#" in k for k in div.witness.inputs), div.witness.inputs
    assert replay_in_fresh_process(div)[0]["reproduced"]
    assert log.status is Status.POSSIBLE, log.message
