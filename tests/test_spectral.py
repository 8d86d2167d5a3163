"""The spectral-gradient kind (GRIST121): the backward pass of eigh/svd vectors at a repeated
eigenvalue or singular value.

The forward value is finite there, so the oracle is the gradient: the op's own backward pass for a
unit gradient on its outputs is non-finite, and the matrix depends on a tensor the program
differentiates (never an input the engine made a leaf). The static pass reports a call only when
the program reads its vectors. The twins of tests/corpus/spectral are checked statically and by
the engine (seed 0; bench/engine_bench.py runs them on seeds 0..9), a witness's reproducer fails in
a fresh process until the fix, and the tie breaker and the detach fixes are verified by the engine.
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
from grist_lsp.dynamic.engine import confirm  # noqa: E402
from grist_lsp.dynamic.options import EngineOptions  # noqa: E402
from grist_lsp.dynamic.verify import fix_verdicts  # noqa: E402
from grist_lsp.model import Status  # noqa: E402

SPECTRAL = Path(__file__).resolve().parent / "corpus" / "spectral"
TWINS = sorted(SPECTRAL.glob("*.py"))
BUGS = [p for p in TWINS if not p.stem.endswith("_fixed")]


def _options(seed: int = 0) -> EngineOptions:
    return EngineOptions(budget=2.0, seed=seed, jobs=1, project_root=str(cm.REPO))


# --- catalogue: the objective --------------------------------------------------------------


def test_gap_distance_is_the_smallest_gap_of_the_spectrum_the_op_reads() -> None:
    region = KINDS["spectral"].region
    assert region.gradient and region.exact_root and KINDS["spectral"].code == "GRIST121"
    assert float(region.distance(3 * torch.eye(3), hermitian=True)) == 0.0
    diagonal = torch.diag(torch.tensor([1.0, 2.0, 4.0]))
    assert float(region.distance(diagonal, hermitian=True)) == pytest.approx(1.0)
    # eigenvalues 1 and -1 are apart; their singular values are not
    signs = torch.diag(torch.tensor([1.0, -1.0]))
    assert float(region.distance(signs, hermitian=True)) == pytest.approx(2.0)
    assert float(region.distance(signs)) == pytest.approx(0.0)
    # a non-square matrix's vectors also divide by its singular values: a zero one counts
    tall = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert float(region.distance(tall)) == pytest.approx(0.0)
    a = torch.tensor([[2.0, 0.5], [0.5, 1.0]], requires_grad=True)
    (g,) = torch.autograd.grad(region.distance(a, hermitian=True), a)
    assert bool(torch.isfinite(g).all()) and float(g.abs().sum()) > 0


# --- static ------------------------------------------------------------------------------------


def test_corpus_has_six_twins() -> None:
    fixed = {p.stem.removesuffix("_fixed") for p in TWINS if p.stem.endswith("_fixed")}
    assert {p.stem for p in BUGS} <= fixed
    confirmed = [p for p in BUGS if any(m.status == "confirmed" for m in cm.parse_markers(p))]
    assert len(confirmed) >= 6


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_static_pass_reports_the_marked_sites(path: Path) -> None:
    assert cm.static_problems(cm.match_markers(path, analyze_file(str(path)))) == []


SPELLINGS = """\
import torch as th


def f(A, B):
    L, V = th.linalg.eigh(A)
    L2, _ = th.linalg.eigh(A)
    v0 = th.linalg.eigh(A)[1]
    w0 = th.linalg.eigh(A).eigenvalues
    vv = th.linalg.eigh(A).eigenvectors
    U, S, Vh = th.linalg.svd(B, full_matrices=False)
    _, S2, _ = th.linalg.svd(B)
    s3 = th.linalg.svd(B).S
    u4, s4, v4 = th.svd(B)
    _u, s5, _v = B.svd()
    out = th.linalg.svd(B)
    s6 = out.S
    both = th.linalg.svd(B)
    r = both.U @ both.Vh
    x = th.svd(B, compute_uv=False)
    ev = th.linalg.eigvalsh(A)
    sv = th.linalg.svdvals(B)
    last = th.linalg.svd(B)[-1]
    return V, L2, v0, w0, vv, U, S, Vh, S2, s3, u4, s5, s6, r, x, ev, sv, last, s4, v4
"""


def test_a_decomposition_is_a_site_only_when_its_vectors_are_read() -> None:
    found = {(v.site.span.start_line, v.site.kind, v.status) for v in analyze_source("f.py", SPELLINGS)}
    assert found == {(line, "spectral", Status.POSSIBLE) for line in (5, 7, 9, 10, 13, 17, 22)}


# --- engine: the twins ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_results() -> dict[Path, list]:
    return cm.confirm_files(TWINS)


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_engine_confirms_bug_twins_by_the_gradient_and_never_the_fixed_ones(
    engine_results: dict, path: Path
) -> None:
    problems, confirmed = cm.engine_problems(path, engine_results[path])
    assert problems == []
    for m in confirmed:
        w = m.verdict.witness
        assert w.phase == "backward" and w.result in ("nan", "inf", "-inf"), (w.phase, w.result)
        assert "gradient is" in m.verdict.message and "(a gap of 0)" in m.verdict.message


# --- the oracle: only a gradient the program could compute ------------------------------------

DATA_ONLY = """\
import torch

X = torch.zeros(6, 3)
cov = X.T @ X + torch.eye(3)
_, V = torch.linalg.eigh(cov)
print((X @ V).sum())
"""

VALUES_ONLY = """\
import torch

W = torch.nn.Parameter(torch.eye(3))
L, _ = torch.linalg.eigh(W @ W.T)
L.sum().backward()
"""


def test_a_tie_nobody_differentiates_is_no_finding_and_values_alone_are_no_site(tmp_path: Path) -> None:
    path = tmp_path / "data_only.py"
    path.write_text(DATA_ONLY)
    (verdict,) = confirm(str(path), DATA_ONLY, analyze_source(str(path), DATA_ONLY), _options())
    assert verdict.site.kind == "spectral" and verdict.status is Status.POSSIBLE
    assert not analyze_source("values_only.py", VALUES_ONLY)


# --- reproducer and fixes ---------------------------------------------------------------------


def test_reproducer_fails_in_a_fresh_process_until_the_vectors_are_detached(tmp_path: Path) -> None:
    program = tmp_path / "procrustes.py"
    shutil.copy(SPECTRAL / "procrustes.py", program)
    repro = tmp_path / "repro"
    run = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(program), "--format", "json", "--budget", "2"]
        + ["--write-reproducers", str(repro)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stderr
    (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["kind"] == "spectral"]
    assert finding["status"] == "confirmed" and finding["witness"]["reproducer"]
    assert any(f["verified"] and f["title"].startswith("Detach") for f in finding["fixes"])
    pytest_run = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        finding["witness"]["reproducer"],
    ]
    failing = subprocess.run(pytest_run, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert failing.returncode == 1 and "nan in the backward pass" in failing.stdout, failing.stdout
    text = program.read_text()
    program.write_text(text.replace("torch.svd(A.T @ B)", "torch.svd((A.T @ B).detach())"))
    passing = subprocess.run(pytest_run, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert passing.returncode == 0, passing.stdout


@pytest.mark.parametrize(
    ("name", "verified"),
    [
        ("kernel_pca_loss.py", "Break ties"),  # a Gram matrix of O(1) entries: the tie breaker holds
        ("zca_whitening.py", "Detach"),  # whitening amplifies the tie breaker: only detach keeps the outputs
    ],
)
def test_the_fix_that_fits_is_verified(name: str, verified: str) -> None:
    path = SPECTRAL / name
    text = path.read_text()
    final = confirm(str(path), text, analyze_file(str(path)), _options())
    fixed = fix_verdicts(str(path), text, final, _options())
    (verdict,) = [v for v in fixed if v.status is Status.CONFIRMED and v.site.kind == "spectral"]
    assert any(f.title.startswith(verified) and f.verified for f in verdict.fixes), verdict.fixes
