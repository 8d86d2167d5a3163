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

from grist_lsp.analyzer.catalogue import lookup
from grist_lsp.dynamic.engine import EngineOptions, confirm
from grist_lsp.model import Site, Span, Status, Verdict, to_json

CORPUS = Path(__file__).parent / "corpus" / "engine"
FAST = dict(budget=1.5, timeout=20.0, seed=0)


def site_at(path: Path, snippet: str, op: str, text: str | None = None) -> Site:
    """The Site of ``snippet`` (first occurrence) in the file, as the static pass would give it."""
    text = path.read_text() if text is None else text
    for i, line in enumerate(text.splitlines(), start=1):
        col = line.find(snippet)
        if col >= 0:
            row = lookup(op)
            return Site(str(path), Span(i, col, i, col + len(snippet)), op, row.kind, row.operand_keyword, snippet)
    raise AssertionError(f"{snippet!r} not in {path}")


def possible(path: Path, *specs: tuple[str, str], text: str | None = None) -> list[Verdict]:
    return [Verdict(site_at(path, s, op, text), Status.POSSIBLE, reason="static: not proved safe") for s, op in specs]


def by_text(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.site.text: v for v in verdicts if v.site.op}


def replay_in_fresh_process(v: Verdict) -> dict:
    """Run replay() in a brand-new interpreter, as a reproducer would."""
    code = (
        "import json, sys\n"
        "from grist_lsp.model import site_from_json, witness_from_json\n"
        "from grist_lsp.dynamic.replay import replay\n"
        "d = json.load(sys.stdin)\n"
        "r = replay(site_from_json(d['site']), witness_from_json(d['witness']))\n"
        "print(json.dumps({'reproduced': r.reproduced, 'result': r.result, 'detail': r.detail}))\n"
    )
    payload = json.dumps({"site": to_json(v.site), "witness": to_json(v.witness)})
    out = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results() -> dict[str, list[Verdict]]:
    """Every corpus program confirmed once (two at a time: the machine is shared)."""
    jobs = {
        "train": (CORPUS / "train_script.py", [
            ("torch.log(p)", "torch.log"),
            ("torch.log(p + 1e-10)", "torch.log"),
            ("torch.exp(logits - logits.max(dim=1, keepdim=True).values)", "torch.exp"),
        ], {}),
        "models": (CORPUS / "models.py", [
            ("torch.sqrt(self.var(h))", "torch.sqrt"),
            ("torch.sqrt(F.softplus(self.var(h)) + 1e-6)", "torch.sqrt"),
            ("x.std(dim=0)", "torch.Tensor.std"),
            ("x.std(dim=0, correction=0)", "torch.Tensor.std"),
        ], {}),
        "entry": (CORPUS / "entry_model.py", [
            ("dot / (a.norm(dim=-1) * b.norm(dim=-1))", "torch.Tensor.__truediv__"),
            ("dot / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-8)", "torch.Tensor.__truediv__"),
        ], {"entries": [str(CORPUS / "entry_model.py") + ":make"]}),
        "upstream": (CORPUS / "upstream.py", [("torch.log(x)", "torch.log"), ("torch.exp(z)", "torch.exp")], {}),
        "backward": (CORPUS / "backward.py", [
            ("torch.sqrt(d2)", "torch.sqrt"), ("torch.sqrt(d2 + 1e-12)", "torch.sqrt"),
        ], {}),
        "var": (CORPUS / "var_script.py", [
            ("h.var(dim=0)", "torch.Tensor.var"), ("x / x.sum(dim=1, keepdim=True)", "torch.Tensor.__truediv__"),
        ], {}),
    }

    def one(name: str) -> tuple[str, list[Verdict]]:
        path, specs, extra = jobs[name]
        text = path.read_text()
        return name, confirm(str(path), text, possible(path, *specs), EngineOptions(**{**FAST, **extra}))

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(one, jobs))


def test_training_script_confirms_log_of_softmax_and_stops_the_loop(results):
    v = by_text(results["train"])
    bug = v["torch.log(p)"]
    assert bug.status is Status.CONFIRMED, bug.reason
    assert bug.site.span.start_line == 19
    w = bug.witness
    assert w.entry == f"script:{CORPUS / 'train_script.py'}"
    assert w.replayed and w.result == "-inf" and w.phase == "forward"
    assert "torch.log receives 0 when x = " in bug.message
    # The input is the loop's torch.randn, keyed by file, line and occurrence.
    assert list(w.inputs) == ["train_script.py:28:torch.randn#0"] or "train_script.py:28:torch.randn#0" in w.inputs
    assert w.input_bound and max(abs(x) for row in w.inputs["train_script.py:28:torch.randn#0"].values for x in row) <= w.input_bound
    assert replay_in_fresh_process(bug) == {"reproduced": True, "result": "-inf", "detail": bug_detail(bug)}


def bug_detail(v: Verdict) -> str:
    return f"{v.site.op} produced {v.witness.result} from finite operands"


def test_safe_twins_are_never_confirmed(results):
    safe = {
        "train": ["torch.log(p + 1e-10)", "torch.exp(logits - logits.max(dim=1, keepdim=True).values)"],
        "models": ["torch.sqrt(F.softplus(self.var(h)) + 1e-6)", "x.std(dim=0, correction=0)"],
        "entry": ["dot / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-8)"],
        "backward": ["torch.sqrt(d2 + 1e-12)"],
    }
    for name, texts in safe.items():
        v = by_text(results[name])
        for t in texts:
            assert v[t].status is Status.POSSIBLE, (name, t, v[t].message)
            assert "searched" in v[t].reason  # the engine did look, within its budget


def test_module_is_probed_without_an_entry(results):
    v = by_text(results["models"])
    sqrt = v["torch.sqrt(self.var(h))"]
    assert sqrt.status is Status.CONFIRMED, sqrt.reason
    assert sqrt.witness.entry == f"probe:{CORPUS / 'models.py'}:GaussianHead"
    assert sqrt.witness.result == "nan" and sqrt.witness.replayed
    assert list(sqrt.witness.inputs) == ["h"] and sqrt.witness.inputs["h"].shape[-1] == 8  # from nn.Linear(8, 4)
    assert sqrt.witness.operand.values is not None and min(min(r) for r in sqrt.witness.operand.values) < 0
    assert replay_in_fresh_process(sqrt)["reproduced"]


def test_std_of_a_batch_of_one_is_found_by_shape_search(results):
    std = by_text(results["models"])["x.std(dim=0)"]
    assert std.status is Status.CONFIRMED, std.reason
    assert std.witness.inputs["x"].shape[0] == 1
    assert std.witness.operand.shape[0] == 1
    assert "one element" in std.message
    var = by_text(results["var"])["h.var(dim=0)"]
    assert var.status is Status.CONFIRMED, var.reason
    assert var.witness.entry.startswith("script:") and var.witness.operand.shape[0] == 1
    assert replay_in_fresh_process(var)["reproduced"]


def test_division_by_an_exact_zero(results):
    v = by_text(results["var"])["x / x.sum(dim=1, keepdim=True)"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.result in ("nan", "inf", "-inf")
    assert replay_in_fresh_process(v)["reproduced"]


def test_explicit_entry_is_used_and_named(results):
    v = by_text(results["entry"])["dot / (a.norm(dim=-1) * b.norm(dim=-1))"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.entry == f"entry:{CORPUS / 'entry_model.py'}:make"
    assert set(v.witness.inputs) <= {"a", "b"} and v.witness.inputs
    assert replay_in_fresh_process(v)["reproduced"]


def test_upstream_nan_is_blamed_upstream_only(results):
    v = by_text(results["upstream"])
    assert v["torch.log(x)"].status is Status.CONFIRMED
    assert v["torch.log(x)"].witness.result == "nan"
    # exp receives the NaN that log made: its operands are not finite, so it is not the culprit.
    assert v["torch.exp(z)"].status is Status.POSSIBLE


def test_backward_only_bug_is_reported_in_the_backward_phase(results):
    v = by_text(results["backward"])["torch.sqrt(d2)"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.phase == "backward"
    assert "backward pass" in v.message
    assert replay_in_fresh_process(v)["reproduced"]


def test_pytest_test_is_an_entry(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "lossmod.py").write_text(
        "import torch\n\n\ndef kl(p, q):\n    return (p * torch.log(p / q)).sum()\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lossmod.py").write_text(
        "import torch\nfrom lossmod import kl\n\n\n"
        "def test_kl_is_non_negative():\n"
        "    logits = torch.randn(3, 5)\n"
        "    p = torch.softmax(logits, dim=1)\n"
        "    q = torch.softmax(torch.randn(3, 5), dim=1)\n"
        "    assert kl(p, q) >= 0\n")
    path = tmp_path / "lossmod.py"
    verdicts = possible(path, ("torch.log(p / q)", "torch.log"))
    out = confirm(str(path), path.read_text(), verdicts, EngineOptions(**FAST, project_root=str(tmp_path)))
    v = by_text(out)["torch.log(p / q)"]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.witness.entry == f"test:{tmp_path / 'tests' / 'test_lossmod.py'}::test_kl_is_non_negative"
    assert any(k.startswith("test_lossmod.py:") for k in v.witness.inputs)
    assert replay_in_fresh_process(v)["reproduced"]


def test_unsaved_buffer_is_what_runs(tmp_path):
    path = tmp_path / "buf.py"
    path.write_text("import torch\n\n\ndef f(x):\n    return torch.log(x.clamp_min(1e-6))\n")
    # The editor's buffer has two more lines and an unguarded log: positions must follow the buffer.
    text = "import torch\n\n# draft\n# draft\n\ndef f(x):\n    return torch.log(x)\n"
    out = confirm(str(path), text, possible(path, ("torch.log(x)", "torch.log"), text=text), EngineOptions(**FAST))
    (v,) = [v for v in out if v.site.op]
    assert v.status is Status.CONFIRMED, v.reason
    assert v.site.span.start_line == 7


def test_same_seed_gives_the_same_witness(results):
    path = CORPUS / "upstream.py"
    again = confirm(str(path), path.read_text(), possible(path, ("torch.log(x)", "torch.log"), ("torch.exp(z)", "torch.exp")),
                    EngineOptions(**FAST))
    w1 = by_text(results["upstream"])["torch.log(x)"].witness
    w2 = by_text(again)["torch.log(x)"].witness
    assert to_json(w1.inputs) == to_json(w2.inputs)
    assert (w1.iterations, w1.result, to_json(w1.operand)) == (w2.iterations, w2.result, to_json(w2.operand))


ERROR_CASES = [
    ("hang.py", "did not", 5),
    ("segfault.py", "segmentation fault", 6),
    ("raises.py", "FileNotFoundError: data/train.pt", 5),
    ("oom.py", "memory", 5),
    ("importerr.py", "No module named 'not_a_real_module_grist'", 2),
]


@pytest.fixture(scope="module")
def broken() -> dict[str, list[Verdict]]:
    """The programs that cannot run, each confirmed with small limits (three at a time)."""

    def one(name: str) -> tuple[str, list[Verdict]]:
        path = CORPUS / name
        text = path.read_text()
        snippet = next(s for s in ("torch.log(x)", "torch.log(chunks[0])", "torch.log(torch.randn(3))") if s in text)
        opts = EngineOptions(budget=1.0, timeout=6.0, memory_mb=1200)
        return name, confirm(str(path), text, possible(path, (snippet, "torch.log")), opts)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(one, [c[0] for c in ERROR_CASES]))


@pytest.mark.parametrize("name, words, line", ERROR_CASES)
def test_programs_that_cannot_run_give_an_error_verdict(broken, name, words, line):
    path = CORPUS / name
    out = broken[name]
    errors = [v for v in out if v.status is Status.ERROR]
    assert len(errors) == 1, [v.message for v in out]
    assert words in errors[0].message
    assert errors[0].site.span.start_line == line
    assert str(path) in errors[0].message
    # The site itself stays possible: nothing was proved either way.
    assert [v.status for v in out if v.site.op] == [Status.POSSIBLE]


def test_static_verdicts_from_the_analyzer_flow_through():
    from grist_lsp.analyzer.analysis import analyze_source

    path = CORPUS / "train_script.py"
    text = path.read_text()
    verdicts = analyze_source(str(path), text)
    out = confirm(str(path), text, verdicts, EngineOptions(**{**FAST, "budget": 1.0}))
    assert len(out) == len(verdicts)
    for before, after in zip(verdicts, out):
        assert after.site == before.site
        if before.status is Status.SAFE:
            assert after == before  # safe verdicts are untouched
    confirmed = [v for v in out if v.status is Status.CONFIRMED]
    assert [(v.site.span.start_line, v.site.kind) for v in confirmed] == [(19, "log")]
