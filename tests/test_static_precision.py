"""What the static pass proves safe on guarded code, and the near-identical code it must not.

Each proof pattern (issue 10, item 5) comes with negative twins: the same code
with the guard gone, weakened, or applied to something else, where a real
input reaches the invalid region. A twin must stay ``possible``: the pass may
be cautious, never wrong.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grist_lsp.analyzer.analysis import analyze_source

HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def _verdicts(src: str) -> dict[int, list[tuple[str, str, str]]]:
    """(kind, status, reason) per line of the body (line 1 is the first line after HEAD)."""
    out: dict[int, list[tuple[str, str, str]]] = {}
    offset = HEAD.count("\n")
    for v in analyze_source("snippet.py", HEAD + textwrap.dedent(src)):
        out.setdefault(v.site.span.start_line - offset, []).append((v.site.kind, v.status.value, v.reason))
    return out


def status_of(src: str, kind: str | None = None) -> list[str]:
    """Statuses of the sites (of ``kind``, if given) on the line marked ``# <-`` (no site: [])."""
    lines = textwrap.dedent(src).splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "# <-" in text)
    return [status for k, status, _ in _verdicts(src).get(line, []) if kind in (None, k)]


def _marked(src: str) -> int:
    return next(i for i, text in enumerate(textwrap.dedent(src).splitlines(), 1) if "# <-" in text)


def reason_of(src: str) -> str:
    lines = textwrap.dedent(src).splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "# <-" in text)
    return _verdicts(src)[line][0][2]


# --- tensor bounds: max / maximum / clamp with a positive tensor ----------------------


@pytest.mark.parametrize(
    "guard",
    [
        "torch.max(a, t.new_tensor([1e-6]))",
        "torch.maximum(a, torch.tensor(1e-6))",
        "a.clamp(min=a.new_tensor(1e-6))",
        "a.clamp_min(torch.scalar_tensor(1e-3))",
        "torch.maximum(a, torch.full_like(a, 1e-6))",
    ],
)
def test_positive_tensor_bound_proves_the_divisor(guard):
    assert status_of(f"def f(a, t):\n    return t / {guard}  # <-\n") == ["safe"]


@pytest.mark.parametrize(
    "guard",
    [
        "torch.max(a, t.new_tensor([0.0]))",  # a floor at 0 keeps 0
        "torch.maximum(a, torch.tensor(-1e-6))",
        "a.clamp(min=t)",  # a tensor bound of unknown sign
        "a.clamp_min(lo)",
        "torch.max(a, lo)",  # lo may be a tensor or a dimension: neither reading is safe
        "torch.max(a, 1)[0]",  # a reduction along dim 1, not a bound
    ],
)
def test_tensor_bound_that_may_be_zero_stays_possible(guard):
    assert status_of(f"def f(a, t, lo):\n    return t / {guard}  # <-\n") == ["possible"]


def test_max_with_a_tensor_of_unknown_type_bounds_both_readings():
    # torch.max(a, b) with b unknown: elementwise (can exceed a) or a reduction along dim b.
    # 1 - torch.max(a, b) may be 0 even when a <= 0.5, so this must stay possible.
    src = "def f(x, b):\n    a = torch.sigmoid(x) * 0.5\n    return x / (1 - torch.max(a, b))  # <-\n"
    assert status_of(src) == ["possible"]


# --- an exponent known only by its range ------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        # math.exp of a default never overridden with an unknown value
        """
    def sharpen(p, log_t=math.log(0.5)):
        return p.sigmoid() ** (1 / math.exp(log_t))  # <-
    sharpen(torch.randn(3), math.log(0.25))
    """,
        # abs(...) + c, c > 0
        """
    def f(x, g):
        return (1 - x.sigmoid()) ** (g.abs() + 1.0)  # <-
    """,
        # a positive default, and every in-file call passes a positive literal
        """
    class Focal(nn.Module):
        def __init__(self, gamma=2.0):
            super().__init__()
            self.gamma = gamma
        def forward(self, p):
            return (1 - p.sigmoid()) ** self.gamma  # <-
    A, B = Focal(), Focal(gamma=1.5)
    """,
        # a positive base takes any exponent
        """
    def f(x, g):
        return (x.abs() + 1e-3) ** g  # <-
    """,
    ],
)
def test_exponent_range_proves_pow(src):
    assert status_of(src, "pow") == ["safe"]


@pytest.mark.parametrize(
    "src",
    [
        # the default is positive but a call passes a negative exponent
        """
    class Focal(nn.Module):
        def __init__(self, gamma=2.0):
            super().__init__()
            self.gamma = gamma
        def forward(self, p):
            return (1 - p.sigmoid()) ** self.gamma  # <-
    A, B = Focal(), Focal(gamma=-0.5)
    """,
        # ... or a value the file does not know
        """
    class Focal(nn.Module):
        def __init__(self, gamma=2.0):
            super().__init__()
            self.gamma = gamma
        def forward(self, p):
            return (1 - p.sigmoid()) ** self.gamma  # <-
    def build(cfg):
        return Focal(gamma=cfg.gamma)
    """,
        # abs(...) - c may be negative, and the base reaches 0
        """
    def f(x, g):
        return (1 - x.sigmoid()) ** (g.abs() - 1.0)  # <-
    """,
        # a positive exponent range does not help a base that may be negative
        """
    def f(x, g):
        return torch.tanh(x) ** (g.abs() + 1.0)  # <-
    """,
        # math.exp of an unknown value: the exponent is >= 0 but the base may be negative
        """
    def f(x: torch.Tensor, log_g):
        return x ** math.exp(log_g)  # <-
    """,
    ],
)
def test_exponent_range_twins_stay_possible(src):
    assert status_of(src, "pow") == ["possible"]


# --- sizes proved >= 1 -------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "def f(x):\n    first = x[0]\n    return x.abs().sum(0) / x.shape[0]  # <-\n",
        "def f(x):\n    head = x[..., 0]\n    return x.sum(-1) / x.size(-1)  # <-\n",
        "def f(x):\n    corner = x[0, 0]\n    return x.sum() / x.shape[1]  # <-\n",
        "def f(xs):\n    if not xs:\n        return 0.0\n    return torch.stack(xs).sum() / len(xs)  # <-\n",
        "def f(xs):\n    if len(xs) == 0:\n        raise ValueError('empty')\n    return torch.stack(xs).sum() / len(xs)  # <-\n",
        "def f(x):\n    if x.numel() > 0:\n        return x.sum() / x.shape[0]  # <-\n",
        "def f(x):\n    assert x.shape[0] >= 1\n    return x.sum() / x.shape[0]  # <-\n",
        "def f(x, n):\n    return x.sum() / max(n, 1)  # <-\n",
        "def f(xs):\n    return sum(xs) / len(xs) if xs else 0.0  # <-\n",
        "def f(x):\n    for c in range(3):\n        s = x[x[:, 0] == c]\n        if s.shape[0] == 0:\n            continue\n"
        "        y = s.sum(0) / s.shape[0]  # <-\n",
    ],
)
def test_size_proved_at_least_one(src):
    assert status_of(src) == ["safe"], reason_of(src)


@pytest.mark.parametrize(
    "src",
    [
        "def f(x, keep):\n    x = x[keep]\n    return x.abs().sum(0) / x.shape[0]  # <-\n",  # nothing says x has a row
        "def f(x, y, keep):\n    x = x[keep]\n    first = y[0]\n    return x.sum(0) / x.shape[0]  # <-\n",  # another tensor indexed
        "def f(x, keep):\n    x = x[keep]\n    head = x[..., 0]\n    return x.sum(0) / x.shape[0]  # <-\n",  # the last dim, not dim 0
        "def f(x, keep):\n    x = x[:, keep]\n    head = x[0]\n    return x.sum(0) / x.shape[-1]  # <-\n",  # dim 0 is not dim -1
        "def f(x, m, keep):\n    x = x[keep]\n    head = x[m]\n    return x.sum(0) / x.shape[0]  # <-\n",  # a mask index may select nothing
        "def f(x, g):\n    first = x[0]\n    x = x[g(x)]\n    return x.sum(0) / x.shape[0]  # <-\n",  # x rebound
        "def f(x, c, keep):\n    x = x[keep]\n    if c:\n        first = x[0]\n    return x.sum(0) / x.shape[0]  # <-\n",  # not on every path
        "def f(xs):\n    first = xs[0]\n    xs.clear()\n    return torch.ones(()) / len(xs)  # <-\n",  # shrunk in between
        "def f(xs, drop):\n    first = xs[0]\n    drop(xs)\n    return torch.ones(()) / len(xs)  # <-\n",  # may shrink it
        "def f(xs):\n    if xs:\n        pass\n    return torch.ones(()) / len(xs)  # <-\n",  # the guard does not leave
        "def f(xs):\n    if len(xs) > 0:\n        return 1.0\n    return torch.ones(()) / len(xs)  # <-\n",  # wrong way round
        "def f(x, k):\n    first = x[0]\n    for _ in range(k):\n        y = x.sum(0) / x.shape[0]  # <-\n"
        "        x = x[x > 0]\n",  # the loop carries a smaller x back
        "def f(x, k):\n    for _ in range(k):\n        first = x[0]\n        if k > 2:\n            x = x[x > 0]\n"
        "        y = x.sum(0) / x.shape[0]  # <-\n",  # same definitions at both, but one lies in between
        "def f(xs):\n    f = lambda: xs[0]\n    return torch.ones(()) / len(xs)  # <-\n",  # a lambda runs later (or never)
        "def f(x, ok, keep):\n    x = x[keep]\n    y = ok and x[0]\n    return x.sum(0) / x.shape[0]  # <-\n",  # x[0] may not run
    ],
)
def test_size_twins_stay_possible(src):
    assert status_of(src) == ["possible"], reason_of(src)


def test_indexing_proves_nothing_in_a_file_that_uses_pandas():
    # df[0] is a column lookup: it succeeds on a frame with no rows
    src = "import pandas as pd\ndef f(df, t: torch.Tensor):\n    col = df[0]\n    return t / df.shape[0]  # <-\n"
    assert status_of(src) == ["possible"]


# --- sums of positives ---------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "def f(x, y):\n    return y / (F.softmax(x, -1) + 1e-8).sum(-1)  # <-\n",
        "def f(x):\n    p = F.softmax(x, -1) + 1e-8\n    return p / p.sum(-1, keepdim=True)  # <-\n",
        "def f(x):\n    w = x.exp().clamp_min(1e-6)\n    return w / torch.sum(w, dim=0)  # <-\n",
    ],
)
def test_sum_of_positive_terms_is_positive(src):
    assert status_of(src) == ["safe"]


@pytest.mark.parametrize(
    "src",
    [
        "def f(x, y):\n    return y / F.softmax(x, -1).sum(-1)  # <-\n",  # terms may all underflow to 0
        "def f(x, y, m):\n    p = F.softmax(x, -1) * m\n    return p / p.sum(-1, keepdim=True)  # <-\n",
        "def f(x, y):\n    p = F.softmax(x, -1) + 1e-8\n    return y / p[x > 0].sum()  # <-\n",  # may select nothing
        "def f(x, y):\n    return y / (F.softmax(x, -1) + 1e-8).nansum()  # <-\n",  # NaN terms are dropped
    ],
)
def test_sum_twins_stay_possible(src):
    assert status_of(src) == ["possible"]


# --- x minus its maximum -----------------------------------------------------------


@pytest.mark.parametrize(
    "shift",
    [
        "x - x.amax(-1, keepdim=True)",
        "x - x.max(dim=-1, keepdim=True).values",
        "x - torch.max(x, -1, keepdim=True)[0]",
        "x - x.max()",
        "x - x.logsumexp(-1, keepdim=True)",
        "x - x.amax(-1, keepdim=True).detach()",
    ],
)
def test_exp_of_a_max_shifted_value_is_bounded(shift):
    assert status_of(f"def f(x):\n    return torch.exp({shift})  # <-\n") == ["safe"]


@pytest.mark.parametrize(
    "shift",
    [
        "x - x.amax(-1)",  # without keepdim it broadcasts against the wrong axis
        "x - y.amax(-1, keepdim=True)",  # another tensor's maximum
        "x - x.amin(-1, keepdim=True)",
        "x - x.mean(-1, keepdim=True)",
        "f(x) - f(x).amax(-1, keepdim=True)",  # two calls may differ (dropout)
    ],
)
def test_max_shift_twins_stay_possible(shift):
    assert status_of(f"def g(x, y, f):\n    return torch.exp({shift})  # <-\n") == ["possible"]


# --- masks un-masked by the program before a softmax ----------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(~mask, float('-inf'))",
        "keep = mask | (mask.sum(dim=-1, keepdim=True) == 0)\n    s = scores.masked_fill(~keep[:, None, :], -math.inf)",
        "keep = mask.clone()\n    keep[..., 0] = True\n    s = torch.where(keep, scores, torch.tensor(float('-inf')))",
        "mask = torch.logical_or(mask, mask.any(-1, keepdim=True).logical_not())\n"
        "    s = scores.masked_fill(mask.logical_not(), float('-inf')) / 8.0",
    ],
)
def test_unmasked_rows_make_no_softmax_site(body):
    src = f"def f(scores, mask):\n    {body}\n    return torch.softmax(s, dim=-1)  # <-\n"
    assert status_of(src) == []


@pytest.mark.parametrize(
    "body, dim",
    [
        ("s = scores.masked_fill(~mask, float('-inf'))", -1),  # nothing un-masks a fully masked row
        ("mask = mask | ~mask.any(1, keepdim=True)\n    s = scores.masked_fill(~mask, float('-inf'))", -1),
        ("mask = mask | ~other.any(-1, keepdim=True)\n    s = scores.masked_fill(~mask, float('-inf'))", -1),
        ("mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(mask, float('-inf'))", -1),
        ("mask = mask | ~mask.any(-1)\n    s = scores.masked_fill(~mask, float('-inf'))", -1),
        (
            "mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(~mask.unsqueeze(-1), float('-inf'))",
            -1,
        ),
        (
            "mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(~mask, float('-inf')).transpose(-1, -2)",
            -1,
        ),
        ("mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(~mask, float('-inf'))", 0),
        (
            "mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(other, float('-inf'))\n"
            "    s = s.masked_fill(~mask, float('-inf'))",
            -1,
        ),
        (
            "mask = mask | ~mask.any(-1, keepdim=True)\n    s = scores.masked_fill(~mask, float('-inf')) * -1.0",
            -1,
        ),
        ("keep = mask.clone()\n    keep[:, 0] = True\n    s = scores.masked_fill(~keep, float('-inf'))", -1),
    ],
)
def test_mask_twins_stay_possible(body, dim):
    src = f"def f(scores, mask, other):\n    {body}\n    return torch.softmax(s, dim={dim})  # <-\n"
    assert status_of(src) == ["possible"]


# --- top-k sampling: every token below the k-th largest logit set to -inf -------------------


@pytest.mark.parametrize(
    "body",
    [
        # minGPT / nanoGPT
        "v, _ = torch.topk(logits, k)\n    logits[logits < v[:, [-1]]] = -float('Inf')",
        # the transformers-style filter
        "remove = logits < torch.topk(logits, k)[0][..., -1, None]\n"
        "    logits = logits.masked_fill(remove, float('-inf'))",
        "kth = logits.topk(k).values[:, -1].unsqueeze(-1)\n    logits[logits < kth] = float('-inf')",
    ],
)
def test_top_k_filtering_keeps_each_rows_maximum(body):
    src = f"def f(logits, k):\n    logits = logits / 0.8\n    {body}\n    return F.softmax(logits, dim=-1)  # <-\n"
    assert status_of(src) == []


@pytest.mark.parametrize(
    "body",
    [
        "v, _ = torch.topk(logits, k)\n    logits[logits <= v[:, [-1]]] = -float('Inf')",  # <= drops the top too
        "v, _ = torch.topk(logits, k, largest=False)\n    logits[logits < v[:, [-1]]] = -float('Inf')",
        "v, _ = torch.topk(other, k)\n    logits[logits < v[:, [-1]]] = -float('Inf')",  # another tensor's top-k
        "v, _ = torch.topk(logits, k)\n    logits[logits < v[:, [0]] + 1] = -float('Inf')",
        "v, _ = torch.topk(logits, k)\n    logits = logits.masked_fill(logits < v[:, [-1]], float('inf'))",
    ],
)
def test_top_k_twins_stay_possible(body):
    src = f"def f(logits, other, k):\n    {body}\n    return F.softmax(logits, dim=-1)  # <-\n"
    assert status_of(src) == ["possible"]


# --- infinities reset by the next statement, in values computed from data ----------------------

LOADED = "    feats = torch.FloatTensor(np.loadtxt('cora.content'))\n    s = torch.sum(feats, dim=1)\n"


@pytest.mark.parametrize(
    "reset",
    [
        "r = 1 / s  # <-\n    r[r == float('inf')] = 0",  # the PyTorch examples' GCN and GAT
        "r = 1.0 / s  # <-\n    r[torch.isinf(r)] = 0.0",
        "r = torch.sqrt(1 / s)  # <-\n    r[r == math.inf] = 0",
        "r = (1 / s).flatten()  # <-\n    r.masked_fill_(torch.isinf(r), 0)",
        "r = 1 / s  # <-\n    r = torch.nan_to_num(r)",
        "r = 1 / s  # <-\n    r = torch.where(torch.isinf(r), 0.0, r)",
        "r = 1 / np.array(s)  # <-\n    r[np.isinf(r)] = 0.0",
    ],
)
def test_an_infinity_reset_on_the_next_line_in_data_is_safe(reset):
    src = f"import numpy as np\ndef load():\n{LOADED}    {reset}\n    return r\n"
    assert status_of(src, "div") == ["safe"]
    assert "resets before any read" in [r for k, _, r in _verdicts(src)[_marked(src)] if k == "div"][0]


@pytest.mark.parametrize(
    "reset, head",
    [
        # a model's value: the reset entries' gradient is 0 * inf = NaN
        ("r = 1 / s  # <-\n    r[torch.isinf(r)] = 0", "def load(s):\n"),
        ("r = 1 / s  # <-\n    r[torch.isinf(r)] = 0", "def load(feats, w):\n    s = (feats @ w).sum(1)\n"),
        ("r = x / s  # <-\n    r[torch.isinf(r)] = 0", f"def load(x):\n{LOADED}"),  # 0 / 0 is NaN, not reset
        (
            "r = 1 / s  # <-\n    print(r.sum())\n    r[torch.isinf(r)] = 0",
            f"def load():\n{LOADED}",
        ),  # read first
        ("r = 1 / s  # <-\n    q[torch.isinf(q)] = 0", f"def load(q):\n{LOADED}"),  # another tensor reset
        ("r = 1 / s  # <-\n    r[torch.isnan(r)] = 0", f"def load():\n{LOADED}"),  # NaN reset, inf kept
        ("r = torch.log(1 / s)  # <-\n    r[torch.isinf(r)] = 0", f"def load():\n{LOADED}"),
    ],
)
def test_infinity_reset_twins_stay_possible(reset, head):
    src = f"import numpy as np\n{head}    {reset}\n    return r\n"
    assert "possible" in status_of(src, "div")


# --- what a user runs ------------------------------------------------------------------


def test_static_only_cli_is_quiet_on_a_fixed_file_and_not_on_its_bug_twin(tmp_path: Path):
    fixed = tmp_path / "pool_safe.py"
    fixed.write_text(
        HEAD
        + textwrap.dedent("""
        def pool(feats, weights):
            w = torch.relu(weights)
            denom = torch.max(w.sum(1, keepdim=True), w.new_tensor([1e-6]))
            return (feats * w).sum(1, keepdim=True) / denom
    """)
    )
    buggy = tmp_path / "pool.py"
    buggy.write_text(fixed.read_text().replace("w.new_tensor([1e-6])", "w.new_zeros(1)"))
    run = [sys.executable, "-m", "grist_lsp", "--check", "--static-only", "--fail-on", "possible"]
    quiet = subprocess.run([*run, str(fixed)], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    noisy = subprocess.run([*run, str(buggy)], capture_output=True, text=True, timeout=120)
    assert noisy.returncode == 1 and "GRIST105 [possible]" in noisy.stdout, noisy.stdout + noisy.stderr
