"""float16 overflow of products and reductions (``overflow``, GRIST119), and precision per tensor.

A float16 ``x.pow(2).sum()``, ``a @ b`` or ``x.var()`` is inf once its result passes 65504, from
finite operands. The static pass follows float16 through the dataflow (casts, ``dtype=``,
``torch.HalfTensor``, a module cast with ``.half()``, float16 autocast regions) and makes such
ops sites only where an operand may be float16; the engine confirms them in the program's own
dtype, steering by the result computed in float32; the fix upcasts the operands. The twins of
tests/corpus/precision are checked statically and by the engine (seed 0; bench/engine_bench.py
runs them on seeds 0..9), a witness's reproducer fails in a fresh process until the fix is
applied, and the fixes are verified by the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file, analyze_source  # noqa: E402
from grist_lsp.analyzer.catalogue import KINDS  # noqa: E402
from grist_lsp.analyzer.fixes import propose_fixes  # noqa: E402
from grist_lsp.dynamic.verify import apply_edits  # noqa: E402
from grist_lsp.model import Status  # noqa: E402

PRECISION = Path(__file__).resolve().parent / "corpus" / "precision"
TWINS, BUGS = cm.twin_files(PRECISION)


# --- catalogue ---------------------------------------------------------------------------------


def test_the_region_is_the_results_magnitude_beyond_the_dtypes_max() -> None:
    region = KINDS["overflow"].region
    assert region.static_safe(-65504.0, 65504.0, "float16")
    assert not region.static_safe(0.0, 70000.0, "float16")
    assert region.static_safe(0.0, 70000.0, "float32")
    # the engine's objective: how far the float32 result is below float16's max
    assert float(region.distance(torch.tensor([60000.0, -1.0]), "torch.float16")) == pytest.approx(5504.0)
    assert float(region.distance(torch.tensor([-70000.0]), "torch.float16")) < 0


# --- static ----------------------------------------------------------------------------------


def test_corpus_has_six_twins() -> None:
    assert cm.missing_twins(TWINS, "overflow") == []


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_static_pass_reports_the_marked_sites(path: Path) -> None:
    assert cm.static_problems(cm.match_markers(path, analyze_file(str(path)))) == []


FORMS = """\
import torch
import torch.nn as nn


def f(x, w, q, k, rewards):
    h = x.half()
    a = h.pow(2).sum()
    b = x.pow(2).sum()
    c = h.float().pow(2).sum()
    d = h.sum(dtype=torch.float32)
    e = torch.randn(4, 4, dtype=torch.float16) @ w
    g = torch.HalfTensor([1.0, 2.0]).prod()
    m = h.mean()
    n = (h > 0).sum()
    with torch.autocast("cuda"):
        s = q @ k
        t = s.sum()
    with torch.autocast("cpu"):
        u = q @ k
    return a, b, c, d, e, g, m, n, s, t, u


layer = nn.Linear(4, 4).half()
p = (layer.weight * 3).norm()
"""


def test_sites_follow_float16_through_the_dataflow() -> None:
    sites = {
        (v.site.span.start_line, v.site.op.rsplit(".", 1)[-1]): v
        for v in analyze_source("forms.py", FORMS)
        if v.site.kind == "overflow"
    }
    lines = {line for line, _ in sites}
    assert {(7, "pow"), (7, "sum")} <= set(sites)  # .half()
    assert 8 not in lines and 9 not in lines and 10 not in lines  # float32, an upcast, dtype=float32
    assert (11, "__matmul__") in sites  # dtype=torch.float16
    assert (12, "prod") in sites  # a legacy torch.HalfTensor
    assert 13 not in lines and 14 not in lines  # a mean stays below the largest entry; a count
    assert (16, "__matmul__") in sites  # CUDA autocast runs products in float16...
    assert 17 not in lines  # ...and sums in float32
    assert 19 not in lines  # CPU autocast without a dtype is bfloat16: float32's range
    assert {(24, "__mul__"), (24, "norm")} <= set(sites)  # a module cast with .half()
    assert all(v.site.dtype == "float16" for v in sites.values())
    assert "float16 (x.half())" in sites[(7, "sum")].reason


def test_numpy_float16_data_and_device_moves() -> None:
    text = (
        "import numpy as np\nimport torch\n\n\ndef f(a, b):\n"
        "    x = torch.from_numpy(a.astype(np.float16)).to('cuda')\n"
        "    y = torch.from_numpy(b.astype('float32'))\n"
        "    return (x * x).sum(), (y * y).sum()\n"
    )
    sites = {
        (v.site.span.start_col, v.site.op) for v in analyze_source("np.py", text) if v.site.kind == "overflow"
    }
    assert sites == {(11, "torch.Tensor.sum"), (12, "torch.Tensor.__mul__")}


def test_a_result_the_ranges_bound_is_safe() -> None:
    text = "import torch\n\n\ndef f(z):\n    p = torch.sigmoid(z.half())\n    return p * p\n"
    [v] = [v for v in analyze_source("bounded.py", text) if v.site.kind == "overflow"]
    assert v.status is Status.SAFE, v.reason
    # a finite float16 value scaled by at most 1 stays finite; by 2, or by an unknown, it may not
    text = "import torch\n\n\ndef f(x, s):\n    h = x.half()\n    return h * 0.5, torch.mul(h, -1.0), h * 2.0, h.mul(s)\n"
    statuses = [v.status for v in analyze_source("scaled.py", text) if v.site.kind == "overflow"]
    assert statuses == [Status.SAFE, Status.SAFE, Status.POSSIBLE, Status.POSSIBLE]


def test_the_fix_upcasts_the_operands_where_the_overflow_starts() -> None:
    text = "import torch\n\n\ndef energy(x):\n    h = x.half()\n    return h.pow(2).sum(-1), h @ h.T\n"
    verdicts = {v.site.op: v for v in analyze_source("energy.py", text) if v.site.kind == "overflow"}
    fixed = {
        op: apply_edits(text, propose_fixes(text, v)[0].edits).splitlines()[5] for op, v in verdicts.items()
    }
    assert fixed["torch.Tensor.sum"] == "    return h.float().pow(2).sum(-1), h @ h.T"
    assert fixed["torch.Tensor.__matmul__"] == "    return h.pow(2).sum(-1), h.float() @ h.T.float()"


# --- engine ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_results() -> dict[Path, list]:
    return cm.confirm_files(TWINS)


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_engine_confirms_bug_twins_and_never_a_fixed_one(engine_results: dict, path: Path) -> None:
    problems, confirmed = cm.engine_problems(path, engine_results[path])
    assert problems == []
    for m in confirmed:
        assert m.verdict.witness.result in ("inf", "-inf")  # from finite float16 operands, not NaN


def test_fixes_are_verified_on_every_bug_twin_with_a_fix(engine_results: dict) -> None:
    verified = cm.verified_fix_flags(BUGS, engine_results, "overflow")
    # autocast casts an upcast product back to float16: that twin has no fix to offer
    assert set(verified) == {p.name for p in BUGS} - {"attention_autocast.py"}
    assert all(any(flags) for flags in verified.values()), verified


def test_reproducer_fails_in_a_fresh_process_until_the_verified_fix_is_applied(tmp_path: Path) -> None:
    problems = cm.reproducer_problems(
        PRECISION / "feature_variance.py",
        tmp_path,
        "GRIST119",
        "Upcast the operands of Tensor.var to float32",
        "embeddings.float().var(dim=0",
    )
    assert problems == []
