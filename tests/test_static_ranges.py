"""The interval + sign abstraction: rounding, arithmetic, guards, facts of library calls."""

from __future__ import annotations

import ast
import math
import struct

import pytest

from grist_lsp.analyzer.catalogue import KINDS
from grist_lsp.analyzer.dataflow import build_dataflow
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.parsing import parse
from grist_lsp.analyzer.ranges import (
    INF,
    Fact,
    RangeAnalysis,
    describe,
    join,
    pow_interval,
    round_down,
    round_up,
    static_safe,
)


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def fact_of(src: str, dtype: str = "float32") -> Fact:
    """The fact of the last line's expression, after the lines before it."""
    tree = parse("import torch\nimport math\nimport torch.nn.functional as F\n" + src)
    flow = build_dataflow(tree)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr)
    return RangeAnalysis(flow, Resolver(flow), dtype).fact(last.value)


def test_outward_rounding_in_each_dtype():
    assert round_down(1e-10, "float32") <= 1e-10 and round_down(1e-10, "float32") > 0
    assert round_down(1e-10, "float32") == _f32(round_down(1e-10, "float32"))  # a float32 value
    assert round_down(1e-8, "float16") == 0.0  # 1e-8 is below float16's smallest subnormal
    assert round_up(1 - 1e-9, "float32") == 1.0
    assert round_down(1 - 1e-7, "float32") < 1.0
    assert round_up(1e39, "float32") == INF and round_down(-1e39, "float32") == -INF
    assert round_down(0.1, "bfloat16") <= 0.1 <= round_up(0.1, "bfloat16")
    assert round_up(0.1, "bfloat16") - round_down(0.1, "bfloat16") < 0.001
    assert round_down(0.1, "float64") == 0.1


def test_pow_interval():
    assert pow_interval(Fact(-2.0, 3.0), 2.0) == (0.0, 9.0)
    assert pow_interval(Fact(-2.0, 3.0), 3.0) == (-8.0, 27.0)
    assert pow_interval(Fact(4.0, 9.0), 0.5) == (2.0, 3.0)
    assert pow_interval(Fact(2.0, 4.0), -1.0) == (0.25, 0.5)
    assert pow_interval(Fact(-1.0, 1.0), -1.0) is None
    assert pow_interval(Fact(-1.0, -0.5), 0.5) is None


def test_join_and_describe():
    j = join([Fact(0.0, 1.0, False, "num", "a"), Fact(2.0, 3.0, True, "num", "b")])
    assert (j.lo, j.hi, j.nonzero, j.pytype) == (0.0, 3.0, False, "num")
    assert describe(Fact(1e-8, INF)) == ">= 1e-08"
    assert describe(Fact(-INF, INF, True)) == "unbounded and != 0"
    assert describe(Fact(0.0, 1.0)) == "in [0, 1]"


def test_static_safe_splits_nonzero_intervals():
    div, log = KINDS["div"].region, KINDS["log"].region
    assert static_safe(Fact(-INF, INF, True), div, "float32")
    assert not static_safe(Fact(-INF, INF, False), div, "float32")
    assert not static_safe(Fact(-1.0, 1.0, True), log, "float32")
    assert static_safe(Fact(0.0, 1.0, True), log, "float32")  # (0, 1]: x > 0


@pytest.mark.parametrize(
    "src, lo, hi",
    [
        ("F.softmax(x, dim=-1)", 0.0, 1.0),
        ("torch.sigmoid(x)", 0.0, 1.0),
        ("x.exp()", 0.0, INF),
        ("torch.exp(-x.abs())", 0.0, 1.0),
        ("F.relu(x)", 0.0, INF),
        ("x.norm() + 1e-6", _f32(1e-6), INF),
        ("x.clamp(min=0.5, max=2)", 0.5, 2.0),
        ("torch.clamp(x, -1, 1)", -1.0, 1.0),
        ("x.clamp_max(3)", -INF, 3.0),
        ("torch.rand(2).clamp(min=torch.rand(2) * 5)", 0.0, 5.0),
        ("torch.rand(2).clamp(max=torch.rand(2) - 1)", -1.0, 0.0),
        ("1 - torch.rand(3)", 0.0, 1.0),
        ("torch.ones(3) * 4", 4.0, 4.0),
        ("torch.full((2,), 2.5)", 2.5, 2.5),
        ("torch.arange(1, 10)", 1.0, 10.0),
        ("x * x", 0.0, INF),
        ("torch.tanh(x)", -1.0, 1.0),
        ("max(x.abs(), 2)", 2.0, INF),
        ("torch.maximum(x, torch.tensor(1e-3))", _f32(1e-3), INF),
        ("torch.max(x, torch.tensor(0.5))", 0.5, INF),
        ("x.clamp(-2, -1).max(torch.tensor(0.5))", 0.5, 0.5),
        ("F.softplus(x) + 1", 1.0, INF),
        ("torch.where(x > 0, x, 1)", 0.0, INF),
        ("x.abs().sum()", 0.0, INF),
        ("x.abs().mean()", 0.0, INF),
        ("x.clamp(-1, 1).mean()", -1.000001, 1.000001),
        ("math.pi", _f32(math.pi), _f32(math.pi)),
    ],
)
def test_facts_of_library_calls(src: str, lo: float, hi: float):
    f = fact_of(src)
    assert f.lo <= lo and f.hi >= hi  # sound
    assert f.lo == pytest.approx(lo, rel=1e-6) and f.hi == pytest.approx(hi, rel=1e-6)  # and tight


def test_softmax_of_masked_scores_still_reaches_zero():
    f = fact_of("s = x.masked_fill(m, float('-inf'))\nF.softmax(s, -1)")
    assert f.lo == 0.0


def test_guards_refine_ranges():
    f = fact_of("torch.where(d == 0, torch.ones_like(d), d)")
    assert f.nonzero and f.lo == -INF
    f = fact_of("d.masked_fill(d == 0, 1.0)")
    assert f.nonzero
    f = fact_of("x[x > 0]")
    assert f.lo == 0.0 and f.nonzero
    f = fact_of("x if x > 1e-3 else 1e-3")
    assert f.lo >= _f32(1e-3) * (1 - 1e-6)
    f = fact_of("torch.where(m, x, 1)")
    assert not f.known


def test_containers_and_matrices_built_from_values():
    assert not fact_of("xs = [torch.ones(1)]\nxs.append(torch.zeros(1))\ntorch.cat(xs)").known
    assert fact_of("torch.cat([torch.ones(1), torch.ones(2) * 2])").lo == 1.0
    assert fact_of("torch.diag(torch.ones(3))").lo == 0.0


def test_python_types_for_operator_filtering():
    assert fact_of("n = len(x)\nn // 2").pytype == "num"
    assert fact_of("'%d' % 3").pytype == "str"
    assert fact_of("total = 0.0\nfor v in xs:\n    total += v.item()\ntotal").pytype == "num"
    assert fact_of("torch.rand(3)").pytype == "tensor"


def test_constants_that_underflow_are_zero():
    f = fact_of("torch.tensor(1e-50)")
    assert f.lo == 0.0 and not f.nonzero
    assert not static_safe(f, KINDS["div"].region, "float32")
    assert fact_of("torch.tensor(1e-30)").lo > 0


def test_half_precision_eps_vanishes():
    assert fact_of("F.softmax(x, -1) + 1e-8", "float16").lo == 0.0
    assert fact_of("F.softmax(x, -1) + 1e-8", "float32").lo > 0.0


def test_cycles_and_unknowns_are_top():
    f = fact_of("d = torch.ones(3)\nfor _ in range(3):\n    d = d / 2\nd")
    assert not f.known
    assert not fact_of("some_function(x)").known
