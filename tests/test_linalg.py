"""Linear-algebra kinds: ``logdet`` (GRIST116) of a matrix whose determinant reaches 0 or goes
negative, ``cholesky`` (GRIST117) of a matrix that is not positive definite, and ``inverse``
(GRIST120: inv, solve) of a singular matrix.

Matrix regions are not elementwise: the engine's objective is spectral (sign(det) times the
smallest singular value; the smallest eigenvalue), the static pass leaves every such site
``possible``, and a cholesky site fails by raising ``torch.linalg.LinAlgError`` rather than
returning NaN, which the oracle counts only when the op at the site raises it from finite
operands. The twins of tests/corpus/linalg are checked statically and by the engine (seed 0;
bench/engine_bench.py runs them on seeds 0..9), a cholesky witness's reproducer fails in a
fresh process until the fix, and the jitter and slogdet fixes are verified by the engine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file, analyze_source  # noqa: E402
from grist_lsp.analyzer.catalogue import KINDS  # noqa: E402
from grist_lsp.analyzer.fixes import propose_fixes  # noqa: E402
from grist_lsp.dynamic.engine import confirm  # noqa: E402
from grist_lsp.dynamic.options import EngineOptions  # noqa: E402
from grist_lsp.dynamic.verify import fix_verdicts  # noqa: E402
from grist_lsp.model import Status  # noqa: E402

LINALG = Path(__file__).resolve().parent / "corpus" / "linalg"
TWINS = sorted(LINALG.glob("*.py"))
BUGS = [p for p in TWINS if not p.stem.endswith("_fixed")]


def _options(seed: int = 0) -> EngineOptions:
    return EngineOptions(budget=2.0, seed=seed, jobs=1, project_root=str(cm.REPO))


# --- catalogue: the regions' objectives ------------------------------------------------------


def test_det_distance_is_signed_smallest_singular_value() -> None:
    region = KINDS["logdet"].region
    assert float(region.distance(torch.diag(torch.tensor([3.0, 0.5])))) == pytest.approx(0.5)
    assert float(region.distance(torch.diag(torch.tensor([3.0, -0.5])))) == pytest.approx(-0.5)
    assert float(region.distance(torch.ones(2, 2))) == pytest.approx(0.0, abs=1e-6)  # singular
    # a batch: the worst matrix counts
    batch = torch.stack([torch.eye(2), torch.diag(torch.tensor([1.0, -2.0]))])
    assert float(region.distance(batch)) == pytest.approx(-1.0)


def test_positive_definite_distance_is_the_smallest_eigenvalue_and_has_a_gradient() -> None:
    region = KINDS["cholesky"].region
    a = torch.tensor([[2.0, 1.0], [1.0, 2.0]], requires_grad=True)  # eigenvalues 1 and 3
    d = region.distance(a)
    assert float(d) == pytest.approx(1.0)
    (g,) = torch.autograd.grad(d, a)
    assert bool(torch.isfinite(g).all()) and float(g.abs().sum()) > 0
    assert float(region.distance(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))) == pytest.approx(-1.0)
    assert float(region.distance(torch.ones(2, 3))) == 1.0  # not square: the op refuses it anyway


def test_singular_distance_is_the_smallest_singular_value_an_exact_root() -> None:
    region = KINDS["inverse"].region
    assert float(region.distance(torch.diag(torch.tensor([3.0, -0.5])))) == pytest.approx(0.5)
    assert float(region.distance(torch.ones(2, 2))) == pytest.approx(0.0, abs=1e-6)
    assert region.exact_root and region.raises  # Newton steps apply; LinAlgError is its failure


def test_matrix_regions_are_never_proved_safe_by_entry_ranges() -> None:
    for kind in ("logdet", "cholesky", "inverse"):
        assert not KINDS[kind].region.static_safe(1.0, 2.0)
        assert KINDS[kind].code in ("GRIST116", "GRIST117", "GRIST120")


# --- static ------------------------------------------------------------------------------------


def test_corpus_has_six_twins_per_kind() -> None:
    fixed = {p.stem.removesuffix("_fixed") for p in TWINS if p.stem.endswith("_fixed")}
    assert {p.stem for p in BUGS} <= fixed
    per_kind: dict[str, int] = {}
    for p in BUGS:
        for kind in {m.kind for m in cm.parse_markers(p) if m.status == "confirmed"}:
            per_kind[kind] = per_kind.get(kind, 0) + 1
    assert all(per_kind.get(kind, 0) >= 6 for kind in ("logdet", "cholesky", "inverse")), per_kind


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_static_pass_reports_the_marked_sites(path: Path) -> None:
    assert cm.static_problems(cm.match_markers(path, analyze_file(str(path)))) == []


SPELLINGS = """\
import torch as th


def f(K, A):
    a = th.logdet(K)
    b = K.logdet()
    c = th.linalg.cholesky(K, upper=True)
    d = th.cholesky(A)
    e = A.cholesky(upper=False)
    s = th.linalg.slogdet(K).logabsdet
    g = th.linalg.cholesky_ex(K).L
    return a, b, c, d, e, s, g
"""


def test_every_spelling_is_a_site_with_its_rule_and_the_safe_forms_are_not() -> None:
    found = {(v.site.span.start_line, v.site.kind, v.status) for v in analyze_source("f.py", SPELLINGS)}
    assert found == {
        (5, "logdet", Status.POSSIBLE),
        (6, "logdet", Status.POSSIBLE),
        (7, "cholesky", Status.POSSIBLE),
        (8, "cholesky", Status.POSSIBLE),
        (9, "cholesky", Status.POSSIBLE),
    }


INVERSES = """\
import torch


def f(K, b):
    a = torch.linalg.inv(K)
    c = K.inverse()
    d = torch.linalg.solve(K, b)
    e = torch.linalg.solve(K, b, left=False)
    g = torch.linalg.inv_ex(K).inverse
    h = torch.linalg.pinv(K)
    return a, c, d, e, g, h
"""


def test_inverse_spellings_are_sites_and_their_fixes_are_jitter_then_pinv() -> None:
    verdicts = {v.site.span.start_line: v for v in analyze_source("f.py", INVERSES)}
    assert {line: (v.site.kind, v.status) for line, v in verdicts.items()} == {
        line: ("inverse", Status.POSSIBLE) for line in (5, 6, 7, 8)
    }
    titles = {
        line: [f.edits[-1].new_text for f in propose_fixes(INVERSES, v)] for line, v in verdicts.items()
    }
    eye = "torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)"
    assert titles[5] == [f"torch.linalg.inv(K + 1e-5 * {eye})", "torch.linalg.pinv(K)"]
    assert titles[6] == [f"(K + 1e-5 * {eye}).inverse()", "torch.linalg.pinv(K)"]
    assert titles[7] == [f"torch.linalg.solve(K + 1e-5 * {eye}, b)", "torch.linalg.pinv(K) @ b"]
    assert titles[8] == [f"torch.linalg.solve(K + 1e-5 * {eye}, b, left=False)"]  # pinv(K) @ b is not B K^-1


def test_fixes_proposed_jitter_first_and_slogdet_for_logdet() -> None:
    verdicts = {v.site.span.start_line: v for v in analyze_source("f.py", SPELLINGS)}
    eye = "th.eye(K.shape[-1], dtype=K.dtype, device=K.device)"
    logdet = propose_fixes(SPELLINGS, verdicts[5])
    assert [f.edits[-1].new_text for f in logdet] == [
        f"th.logdet(K + 1e-5 * {eye})",
        "th.linalg.slogdet(K).logabsdet",
    ]
    method = propose_fixes(SPELLINGS, verdicts[9])
    assert method[0].edits[-1].new_text.startswith("(A + 1e-5 * th.eye(A.shape[-1]")
    assert method[0].edits[-1].new_text.endswith(").cholesky(upper=False)")


# --- engine: the twins ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_results() -> dict[Path, list]:
    return cm.confirm_files(TWINS)


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_engine_confirms_bug_twins_and_never_the_fixed_ones(engine_results: dict, path: Path) -> None:
    problems, confirmed = cm.engine_problems(path, engine_results[path])
    assert problems == []
    for m in confirmed:
        w = m.verdict.witness
        if m.kind == "cholesky":
            assert w.result == "LinAlgError" and "raises LinAlgError" in m.verdict.message
            assert "smallest eigenvalue" in m.verdict.message
        elif m.kind == "inverse":
            assert w.result in ("LinAlgError", "nan", "inf", "-inf"), w.result
            assert "smallest singular value" in m.verdict.message
        else:
            assert w.result in ("nan", "-inf") and "det(A) = " in m.verdict.message


# --- the oracle: a raised LinAlgError is the site's only when it is the site's -------------------

NOT_A_SITE = """\
import torch

A = torch.ones(3, 3)
L = torch.linalg.cholesky(torch.linalg.inv(A))
"""

UPSTREAM = """\
import torch

A = torch.randn(3, 3)
B = A @ A.T + torch.eye(3)
B = B / torch.zeros(())
L = torch.linalg.cholesky(B)
"""


def test_an_error_from_another_op_or_from_non_finite_operands_is_not_a_cholesky_finding(
    tmp_path: Path,
) -> None:
    for name, text in (("not_a_site.py", NOT_A_SITE), ("upstream.py", UPSTREAM)):
        path = tmp_path / name
        path.write_text(text)
        final = confirm(str(path), text, analyze_source(str(path), text), _options())
        assert not [v for v in final if v.site.kind == "cholesky" and v.status is Status.CONFIRMED], name


# --- reproducer and fixes ---------------------------------------------------------------------


def test_cholesky_reproducer_fails_in_a_fresh_process_until_the_jitter(tmp_path: Path) -> None:
    program = tmp_path / "gauss_newton.py"
    shutil.copy(LINALG / "gauss_newton.py", program)
    repro = tmp_path / "repro"
    run = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(program), "--format", "json", "--budget", "2"]
        + ["--write-reproducers", str(repro)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["kind"] == "cholesky"]
    assert finding["status"] == "confirmed" and finding["witness"]["reproducer"]
    assert any(f["verified"] and "diagonal" in f["title"] for f in finding["fixes"])
    test_file = finding["witness"]["reproducer"]
    pytest_run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file]
    failing = subprocess.run(pytest_run, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert failing.returncode == 1 and "LinAlgError" in failing.stdout, failing.stdout
    program.write_text((LINALG / "gauss_newton_fixed.py").read_text())
    passing = subprocess.run(pytest_run, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert passing.returncode == 0, passing.stdout


@pytest.mark.parametrize(
    ("name", "verified"),
    [
        ("gp_marginal.py", "Add 1e-5 to the diagonal"),  # a kernel matrix: the jitter repairs it
        ("flow_linear.py", "Use torch.linalg.slogdet"),  # a free matrix: only slogdet does
        ("gp_predict_inv.py", "Add 1e-5 to the diagonal"),  # a kernel (entries <= 1): the jitter holds
        ("lda_direction.py", "Use torch.linalg.pinv"),  # a scatter matrix of any scale: pinv holds
    ],
)
def test_the_fix_that_fits_the_matrix_is_verified(name: str, verified: str) -> None:
    path = LINALG / name
    text = path.read_text()
    final = confirm(str(path), text, analyze_file(str(path)), _options())
    fixed = fix_verdicts(str(path), text, final, _options())
    (verdict,) = [
        v for v in fixed if v.status is Status.CONFIRMED and v.site.kind in ("logdet", "cholesky", "inverse")
    ]
    assert any(f.title.startswith(verified) and f.verified for f in verdict.fixes), verdict.fixes
    if name == "flow_linear.py":
        # the jitter cannot repair a matrix whose determinant goes negative: the re-check says so
        assert not any(f.title.startswith("Add") and f.verified for f in verdict.fixes), verdict.fixes
