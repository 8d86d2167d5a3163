"""Arithmetic on an intended infinity (``inf_arith``, GRIST118).

``-(p * log_softmax(scores.masked_fill(~m, -inf))).sum()`` is NaN wherever an entry is masked:
``0 * -inf``. The -inf is the program's intent, so the old first-non-finite oracle blamed nobody.
Now a product or contraction fed such an infinity (or a sum or difference of two) is a site; the
engine confirms it only by a NaN from operands that hold nothing but the program's infinities,
never when an earlier broken site made the infinity; the fix keeps the infinity out with
``torch.nan_to_num``. The twins of tests/corpus/infarith are checked statically and by the
engine (seed 0; bench/engine_bench.py runs them on seeds 0..9), a witness's reproducer fails in a
fresh process until the fix is applied, and the fix is verified by the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file, analyze_source  # noqa: E402
from grist_lsp.dynamic.engine import confirm  # noqa: E402
from grist_lsp.dynamic.options import EngineOptions  # noqa: E402
from grist_lsp.model import Status  # noqa: E402

INFARITH = Path(__file__).resolve().parent / "corpus" / "infarith"
TWINS, BUGS = cm.twin_files(INFARITH)


def _options() -> EngineOptions:
    return EngineOptions(budget=2.0, seed=0, jobs=1, project_root=str(cm.REPO))


# --- static ---------------------------------------------------------------------------------


def test_corpus_has_six_twins() -> None:
    assert cm.missing_twins(TWINS, "inf_arith") == []


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_static_pass_reports_the_marked_sites(path: Path) -> None:
    assert cm.static_problems(cm.match_markers(path, analyze_file(str(path)))) == []


FORMS = """\
import torch


def f(scores, mask, v, d, eye, lowest):
    neg = scores.masked_fill(mask, float("-inf"))
    pos = d.masked_fill(eye, float("inf"))
    a = neg * v
    b = scores + neg
    c = neg - neg.amax(-1, keepdim=True)
    e = neg * 2.0
    g = torch.softmax(neg, -1) * v
    h = (-neg) - pos
    k = neg / 8.0 + pos
    m = scores.masked_fill(mask, lowest) * v
    n = torch.nan_to_num(neg, nan=torch.nan) * v
    o = torch.exp(neg) * v
    p = torch.exp(pos) * v
    q = neg + neg
    return a, b, c, e, g, h, k, m, n, o, p, q
"""


def test_sites_follow_where_an_intended_infinity_can_meet_its_partner() -> None:
    lines = {
        v.site.span.start_line: v for v in analyze_source("forms.py", FORMS) if v.site.kind == "inf_arith"
    }
    assert lines[7].site.operand == "left"  # -inf * v: v may be 0
    assert 8 not in lines  # an additive -inf mask on finite scores is the intended -inf
    assert lines[9].site.operand == "both"  # -inf - -inf in a fully masked row
    assert 10 not in lines  # -inf * 2.0 is -inf
    assert 11 not in lines  # a softmax's output is finite
    assert lines[12].site.operand == "both"  # -(-inf) is +inf, and +inf - +inf is NaN
    assert lines[13].site.operand == "both"  # -inf / 8 stays -inf, and -inf + +inf is NaN
    assert 14 not in lines  # a finite fill
    assert 15 not in lines  # nan_to_num turns the infinities finite
    assert 16 not in lines  # exp(-inf) is 0
    assert lines[17].site.operand == "left"  # exp(+inf) is +inf
    assert 18 not in lines  # -inf + -inf is -inf
    assert "may hold an infinity (a -inf constant: float('-inf'))" in lines[7].reason


# --- engine ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_results() -> dict[Path, list]:
    return cm.confirm_files(TWINS)


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_engine_confirms_bug_twins_and_never_a_fixed_one(engine_results: dict, path: Path) -> None:
    problems, confirmed = cm.engine_problems(path, engine_results[path])
    assert problems == []
    for m in confirmed:
        assert m.verdict.witness.result == "nan"  # from operands with only the program's infinities


def test_an_infinity_an_earlier_bug_made_is_that_bugs_finding(tmp_path: Path) -> None:
    """log(0) is -inf: the product after it is not a second report of the same NaN."""
    program = tmp_path / "prog.py"
    program.write_text(
        "import torch\n"
        "neg = torch.randn(6).masked_fill(torch.rand(6) > 2.0, float('-inf'))\n"
        "p = torch.rand(6)\n"
        "bad = torch.log(p - p)\n"
        "print((bad + neg) * torch.zeros(6))\n"
    )
    final = confirm(str(program), program.read_text(), analyze_file(str(program)), _options())
    by_line = {(v.site.span.start_line, v.site.kind): v for v in final}
    assert by_line[(4, "log")].status is Status.CONFIRMED
    arith = [v for v in final if v.site.kind == "inf_arith"]
    assert arith and all(v.status is not Status.CONFIRMED for v in arith), [v.reason for v in arith]


# --- witness, reproducer and fix -------------------------------------------------------------


def test_reproducer_fails_in_a_fresh_process_until_the_verified_fix_is_applied(tmp_path: Path) -> None:
    problems = cm.reproducer_problems(
        INFARITH / "policy_entropy.py",
        tmp_path,
        "GRIST118",
        "Keep the infinities of log_probs out of *: torch.nan_to_num",
        "torch.nan_to_num(log_probs, nan=torch.nan)",
    )
    assert problems == []


def test_fixes_are_verified_on_every_bug_twin_with_a_fix(engine_results: dict) -> None:
    verified = cm.verified_fix_flags(BUGS, engine_results, "inf_arith")
    assert set(verified) == {p.name for p in BUGS}
    assert all(any(flags) for flags in verified.values()), verified
