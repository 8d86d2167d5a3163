"""Where-branch sites: an unsafe op whose value the program discards where it is invalid.

``torch.where(x > 0, torch.log(x), 0)`` is finite forward, but at ``x == 0`` its gradient is
``0 * inf = NaN``. The static pass marks such sites (``Site.discarded_by``), the engine confirms
them only by a non-finite gradient (never by the NaN/INF forward value the program throws away),
and the double-where fix is verified. The twins of tests/corpus/where are checked statically and
dynamically; the canonical program is checked end to end through the CLI, with its witness
replayed in a fresh process by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file, analyze_source  # noqa: E402
from grist_lsp.analyzer.fixes import propose_fixes  # noqa: E402

WHERE = Path(__file__).resolve().parent / "corpus" / "where"
TWINS = sorted(WHERE.glob("*.py"))
BUGS = [p for p in TWINS if not p.stem.endswith("_fixed") and p.name != "no_backward.py"]

# The canonical trap: the log's operand is 0 wherever a feature is 0.
CANONICAL = """\
import torch


def objective(features, gain):
    x = features * gain
    y = torch.where(x > 0, torch.log(x), 0)
    return y.sum()


torch.manual_seed(0)
features = torch.randn(8)
gain = torch.ones(8, requires_grad=True)
objective(features, gain).backward()
"""
SITE_LINE = 6


# --- static ---------------------------------------------------------------------------------


def test_corpus_has_six_twins_per_guard_form() -> None:
    fixed = {p.stem.removesuffix("_fixed") for p in TWINS if p.stem.endswith("_fixed")}
    assert len(BUGS) >= 6 and {p.stem for p in BUGS} <= fixed
    kinds = {m.kind for p in BUGS for m in cm.parse_markers(p) if m.status == "confirmed"}
    assert {"log", "sqrt", "div", "pow"} <= kinds


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_static_pass_reports_the_marked_sites_and_marks_them_where_branch(path: Path) -> None:
    verdicts = analyze_file(str(path))
    assert cm.static_problems(cm.match_markers(path, verdicts)) == []
    for m in cm.match_markers(path, verdicts):
        if m.marker is not None and m.marker.status == "confirmed":
            assert m.verdict.site.discarded_by is not None
            assert "gradient still flows through the discarded branch" in m.verdict.reason


FORMS = """\
import torch


def f(x, m):
    a = torch.where(x > 0, torch.log(x), 0)
    b = torch.sqrt(x).masked_fill(x <= 0, 0)
    c = torch.log(x)[x > 0]
    d = torch.nan_to_num(1 / x)
    y = torch.log(x)
    z = -y * 2
    e = torch.where(x <= 0, 0.0, z)
    g = torch.sqrt(x)
    g[x < 0] = 0
    h = torch.log(x).where(x > 0, 0.0)
    kept = torch.log(x)
    scores = (x / m).masked_fill(x > 0, float("-inf"))
    seen = torch.log(x)
    print(seen)
    return a, b, c, d, e, g, h, kept, torch.log(x).mean(), torch.log(x)[0], scores, torch.where(x > 0, seen, 0)
"""


def test_each_discarding_form_is_recognised_and_a_plain_use_is_not() -> None:
    by_line: dict[int, list[str | None]] = {}
    for v in analyze_source("forms.py", FORMS):
        by_line.setdefault(v.site.span.start_line, []).append(v.site.discarded_by)
    assert by_line[5] == ["torch.where on line 5"]
    assert by_line[6] == ["Tensor.masked_fill on line 6"]
    assert by_line[7] == ["the boolean indexing on line 7"]
    assert by_line[8] == ["torch.nan_to_num on line 8"]
    assert by_line[9] == ["torch.where on line 11"]  # through two assignments
    assert by_line[12] == ["the masked assignment on line 13"]
    assert by_line[14] == ["Tensor.where on line 14"]
    assert by_line[15] == [None]  # returned as is: nothing discards it
    assert by_line[16] == [None]  # a mask about x says nothing about the divisor m
    assert by_line[17] == [None]  # printed before it is discarded: its NaN is seen
    assert by_line[19] == [None, None]  # a mean and an integer index keep the value


def test_double_where_fix_is_proposed_first() -> None:
    verdict = next(
        v for v in analyze_source("canonical.py", CANONICAL) if v.site.span.start_line == SITE_LINE
    )
    fixes = propose_fixes(CANONICAL, verdict)
    assert fixes[0].edits[-1].new_text == "torch.log(torch.where(x > 0, x, 1))"
    assert "double where" in fixes[0].title


def test_objective_is_the_distance_to_the_edge_not_into_the_region() -> None:
    """log(-3) is deep in the region yet its discarded gradient is finite: the search aims at 0."""
    import torch

    from grist_lsp.analyzer.catalogue import KINDS
    from grist_lsp.dynamic.tracing import edge_distance

    assert float(edge_distance(KINDS["log"].region, torch.tensor([-3.0, 2.0]), "float32")) == 2.0
    assert float(edge_distance(KINDS["acos"].region, torch.tensor([0.5, 1.25]), "float32")) == 0.25
    assert float(KINDS["log"].region.distance(torch.tensor([-3.0, 2.0]))) == -3.0  # the plain objective


# --- engine: the canonical program through the CLI -------------------------------------------


@pytest.fixture(scope="module")
def canonical(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("where")
    path = folder / "canonical.py"
    path.write_text(CANONICAL)
    run = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(path), "--format", "json", "--budget", "3"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    return path, json.loads(run.stdout)


def test_canonical_where_log_is_confirmed_at_zero_by_its_gradient(canonical: tuple[Path, dict]) -> None:
    _, report = canonical
    (finding,) = [f for f in report["findings"] if f["line"] == SITE_LINE]
    assert finding["status"] == "confirmed" and finding["kind"] == "log"
    assert (
        "its gradient is nan in the backward pass, through the value torch.where on line 6 discards"
        in (finding["message"])
    )
    assert "torch.log receives 0 " in finding["message"]
    (values,) = [v["values"] for v in finding["witness"]["inputs"].values()]
    assert 0.0 in values  # x = features * gain (gain 1): exactly 0 at the root


def test_canonical_witness_gives_a_nan_gradient_in_a_fresh_process(canonical: tuple[Path, dict]) -> None:
    path, report = canonical
    (finding,) = [f for f in report["findings"] if f["line"] == SITE_LINE]
    (values,) = [v["values"] for v in finding["witness"]["inputs"].values()]
    code = textwrap.dedent(
        f"""
        import importlib.util, torch
        spec = importlib.util.spec_from_file_location("canonical", {str(path)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        features = torch.tensor({values!r})
        gain = torch.ones(len(features), requires_grad=True)
        loss = module.objective(features, gain)
        loss.backward()
        print(bool(torch.isfinite(loss)), bool(torch.isfinite(gain.grad).all()))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["True", "False"], run.stderr  # finite loss, non-finite gradient


def test_canonical_double_where_fix_is_verified(canonical: tuple[Path, dict]) -> None:
    path, _ = canonical
    run = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(path), "--diff", "--budget", "3"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr  # a verified fix to apply
    assert "+    y = torch.where(x > 0, torch.log(torch.where(x > 0, x, 1)), 0)" in run.stdout


def test_a_negative_operand_whose_nan_is_discarded_does_not_replay(tmp_path: Path) -> None:
    """What the engine used to confirm: x < 0, log(x) NaN forward, thrown away, finite gradient."""
    path = tmp_path / "canonical.py"
    path.write_text(CANONICAL)
    code = textwrap.dedent(
        f"""
        from grist_lsp.analyzer.analysis import analyze_file
        from grist_lsp.dynamic.replay import replay
        from grist_lsp.model import TensorValue, Witness
        site = next(v.site for v in analyze_file({str(path)!r}) if v.site.span.start_line == {SITE_LINE})
        for value in (-0.25, 2.0):
            witness = Witness(
                entry="script:" + {str(path)!r},
                inputs={{"canonical.py:11:torch.randn#0": TensorValue([8], "float32", [value] * 8)}},
                weights_moved={{}}, operand=None, result="nan",
            )
            r = replay(site, witness)
            print(r.reproduced, r.result)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # x = -0.25: log's NaN is discarded and its gradient (0 / -0.25) is finite; x = 2: nothing wrong.
    assert run.stdout.split() == ["False", "finite", "False", "finite"], run.stderr
    run = subprocess.run(
        [sys.executable, "-c", code.replace("(-0.25, 2.0)", "(0.0,)")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.stdout.split() == ["True", "nan"], run.stderr  # x = 0 exactly: the gradient is NaN


# --- engine: the corpus twins ------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_results() -> dict[Path, list]:
    return cm.confirm_files(TWINS)


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_engine_confirms_bug_twins_by_gradient_and_leaves_the_rest(engine_results: dict, path: Path) -> None:
    problems, confirmed = cm.engine_problems(path, engine_results[path], strict=True)
    assert problems == []
    for m in confirmed:
        w = m.verdict.witness
        assert w.phase == "backward" and w.result in ("nan", "inf", "-inf")
        operand = w.operand.values if w.operand.values is not None else None
        flat = json.dumps(operand) if operand is not None else ""
        # At the edge (0) or, for pow's fractional exponent, inside (a negative base): both break
        # the gradient; no witness is a discarded forward value with a finite gradient.
        assert operand is None or "0.0" in flat or m.kind == "pow", flat
