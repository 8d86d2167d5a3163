"""What may flow into a mean's or a softmax's operand (analyzer/provenance.py), and the
verdict reasons that name it."""

from __future__ import annotations

import ast

import pytest

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.analyzer.dataflow import build_dataflow
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.parsing import parse
from grist_lsp.analyzer.provenance import Provenance
from grist_lsp.analyzer.ranges import RangeAnalysis
from grist_lsp.model import Status

HEADER = "import math\nimport torch\nimport torch.nn as nn\n\n\ndef f(x, mask, y, i: int, n):\n"


def _last(body: str) -> tuple[Provenance, ast.expr]:
    """The provenance questions about the last statement's expression in f's body."""
    tree = parse(HEADER + "".join(f"    {line}\n" for line in body.splitlines()))
    flow = build_dataflow(tree)
    resolver = Resolver(flow)
    last = tree.body[-1].body[-1]  # type: ignore[attr-defined]
    assert isinstance(last, ast.Expr)
    return Provenance(flow, resolver, RangeAnalysis(flow, resolver)), last.value


@pytest.mark.parametrize(
    "body, words",
    [
        ("x[mask]", "indexing with mask (maybe a boolean mask)"),
        ("x[x > 0]", "boolean-mask indexing with x > 0"),
        ("x[(x > 0) & (y < 1)]", "boolean-mask indexing with (x > 0) & (y < 1)"),
        ("x[:n]", "slicing with computed bounds: [:n]"),
        ("x[torch.arange(3), :n]", "slicing with computed bounds: [:n]"),
        (
            "x.masked_select(y.isnan())",
            "masked_select keeps only the elements its mask admits: x.masked_select(y.isnan())",
        ),
        (
            "k = torch.nonzero(y)[:, 0]\n(x[k] * 2).abs()",
            "indexing with nonzero indices (none when everything is zero): torch.nonzero(y)",
        ),
        (
            "r, c = torch.where(y > 0)\nx[r, c]",
            "indexing with torch.where(cond) indices (none when cond is all False): torch.where(y > 0)",
        ),
        ("m = y.ne(0)\nx[m].sum(dim=0)", "boolean-mask indexing with y.ne(0)"),
        ("parts = []\ntorch.stack(parts)", "stack of a list built at run time: torch.stack(parts)"),
    ],
)
def test_selections_that_may_be_empty_are_named(body: str, words: str) -> None:
    prov, e = _last(body)
    assert prov.may_be_empty(e) == words


@pytest.mark.parametrize(
    "body",
    [
        "x",
        "x.pow(2)",
        "x[0]",
        "x[i]",
        "x[:, 1:]",
        "x[torch.arange(3)]",
        # Beside positions, another index array selects as many or fails (never nothing).
        "x[torch.arange(n), y]",
        "x[range(len(y)), y]",
        "x[torch.arange(x.shape[0]), mask]",
        "torch.stack([x, y])",
        "x[mask].sum()",
        "torch.where(mask, x, y)",
        "x[{'a': 1}['a']]",
    ],
)
def test_whole_tensors_and_fixed_selections_are_not_empty(body: str) -> None:
    prov, e = _last(body)
    assert prov.may_be_empty(e) is None


@pytest.mark.parametrize(
    "body, holds",
    [
        ("x.masked_fill(mask, float('-inf'))", True),
        ("x.masked_fill(mask, -math.inf)", True),
        ("x.masked_fill(mask, -torch.inf)", True),
        ("torch.full((3, 3), float('-inf')).triu(1) + x", True),
        ("s = x.clone()\ns[mask] = float('-inf')\ns", True),
        ("x.masked_fill_(mask, float('-inf'))\nx", True),
        ("torch.where(mask, x, torch.tensor(float('-inf')))", True),
        ("x.masked_fill(mask, -1e9)", False),
        ("x.masked_fill(mask, torch.finfo(x.dtype).min)", False),
        ("x.masked_fill(x == float('-inf'), 0.0)", False),
        ("x", False),
    ],
)
def test_operands_that_may_hold_minus_infinity(body: str, holds: bool) -> None:
    prov, e = _last(body)
    assert (prov.may_hold_neg_inf(e) is not None) == holds


def test_a_finite_fill_that_overflows_the_files_dtype_is_minus_infinity() -> None:
    src = (
        HEADER
        + "    return x.half().masked_fill(mask, -1e9).softmax(-1), x.masked_fill(mask, -1e4).softmax(-1)\n"
    )
    (v,) = analyze_source("h.py", src)
    assert (v.site.span.start_line, v.site.span.start_col, v.site.op) == (7, 11, "torch.Tensor.softmax")
    assert (
        v.reason
        == "the operand may hold -inf (-1000000000.0, which is -inf in float16), and a row that is entirely -inf gives NaN"
    )
    assert analyze_source("f.py", src.replace("x.half()", "x")) == []  # float32: -1e9 is finite


def test_verdict_reasons_say_where_the_empty_selection_and_the_minus_infinity_come_from() -> None:
    src = HEADER + (
        "    a = x[x > 0].mean()\n"
        "    b = x.mean()\n"
        "    c = x.masked_fill(~mask, float('-inf')).softmax(-1)\n"
        "    d = x.masked_fill(~mask, -1e9).softmax(-1)\n"
    )
    verdicts = analyze_source("m.py", src)
    got = [(v.site.span.start_line, v.site.span.start_col, v.site.op, v.status) for v in verdicts]
    assert got == [
        (7, 8, "torch.Tensor.mean", Status.POSSIBLE),
        (9, 8, "torch.Tensor.softmax", Status.POSSIBLE),
    ]
    assert verdicts[0].reason == (
        "the operand may have zero elements (boolean-mask indexing with x > 0), "
        "and zero elements along the reduced dimensions gives NaN"
    )
    assert verdicts[1].reason == (
        "the operand may hold -inf (a -inf constant: float('-inf')), "
        "and a row that is entirely -inf gives NaN"
    )
    assert verdicts[1].site.kind == "softmax"


def test_calls_of_attributes_bound_to_modules_are_not_tensor_methods() -> None:
    src = (
        "import torch\nimport torch.nn as nn\n\n\nclass H(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.norm = nn.LayerNorm(4)\n\n"
        "    def forward(self, x):\n        return torch.log(self.norm(x) + 1e-6), torch.log(x.norm() + 1e-6)\n"
    )
    first, second = analyze_source("h.py", src)
    assert (first.site.span.start_col, first.status) == (15, Status.POSSIBLE)
    assert first.reason == "no range known for the operand (self.norm(x) + 1e-06)"  # not "norm >= 0"
    assert (second.site.span.start_col, second.status) == (47, Status.SAFE)
