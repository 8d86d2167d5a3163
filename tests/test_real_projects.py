"""The static pass on the idioms of real projects, as a user sees them (issue 26).

Python numbers raise instead of going NaN (safe, with the reason under ``--show-safe``, never
under a tensor's name); causal masks, a module's own ``eps`` and sinusoidal position encodings
are quiet; what is real (one-step reward normalisation, a tensor divided by a number that may
be 0, Python ``inf - inf``) stays ``possible``. The last test holds the labelled corpus of
bench/real_projects to its goals: precision of ``possible`` >= 0.6, no real site missed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.model import Status, Verdict

REPO = Path(__file__).resolve().parents[1]


def _at(verdicts: list[Verdict], line: int, kind: str) -> list[Verdict]:
    return [v for v in verdicts if v.site.span.start_line == line and v.site.kind == kind]


def _line_of(src: str, needle: str) -> int:
    return next(i for i, text in enumerate(src.splitlines(), 1) if needle in text)


TRAIN = """import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, n_head):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head)
        return q * (1.0 / math.sqrt(k.size(-1)))


def train(args, model, loader, opt):
    total = 0.0
    for batch_idx, (x, y) in enumerate(loader):
        loss = F.mse_loss(model(x), y)
        total += loss.item()
        if batch_idx % args.log_interval == 0:
            print(100.0 * batch_idx / len(loader), math.exp(total / (batch_idx + 1)))


def scale(x, args):
    return x / args.scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    print(args)
"""


def test_python_number_ops_are_safe_with_the_reason_and_never_under_a_tensor_name():
    verdicts = analyze_source("train.py", TRAIN)
    log_line = _line_of(TRAIN, "batch_idx % args.log_interval")
    (mod,) = _at(verdicts, log_line, "div")
    assert mod.status is Status.SAFE
    assert mod.site.op == "builtins.float.__mod__"
    assert "raises ZeroDivisionError, not NaN" in mod.reason
    assert "args.log_interval" in mod.reason
    head = _at(verdicts, _line_of(TRAIN, "C // self.n_head"), "div")
    assert [v.status for v in head] == [Status.SAFE] and head[0].site.op == "builtins.float.__floordiv__"
    sqrt_line = _line_of(TRAIN, "math.sqrt(k.size(-1))")
    assert {v.status for v in _at(verdicts, sqrt_line, "sqrt") + _at(verdicts, sqrt_line, "div")} == {
        Status.SAFE
    }
    print_line = _line_of(TRAIN, "print(100.0 * batch_idx")
    exp = _at(verdicts, print_line, "exp")
    assert [v.status for v in exp] == [Status.SAFE] and "OverflowError" in exp[0].reason
    assert all(v.status is Status.SAFE for v in _at(verdicts, print_line, "div"))
    for v in verdicts:
        if v.status is Status.SAFE and "Python numbers" in v.reason:
            assert not v.site.op.startswith("torch.")


def test_a_division_by_an_option_is_a_setting_not_a_nan_site():
    # issue 36: an argparse option is a setting of the program; a 0 there is the user's typo,
    # which data and training never reach (the value divided is of unknown origin here, too)
    verdicts = analyze_source("train.py", TRAIN)
    (div,) = _at(verdicts, _line_of(TRAIN, "return x / args.scale"), "div")
    assert div.status is Status.SAFE and "args.scale" in div.reason


def test_show_safe_prints_the_python_number_reason(tmp_path: Path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    out = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(path), "--static-only", "--show-safe"],
        capture_output=True,
        text=True,
        cwd=str(REPO),
    )
    assert out.returncode in (0, 1), out.stderr
    line = _line_of(TRAIN, "batch_idx % args.log_interval")
    shown = [text for text in out.stdout.splitlines() if f"train.py:{line}:" in text]
    assert shown and "[safe]" in shown[0] and "raises ZeroDivisionError, not NaN" in shown[0]
    quiet = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(path), "--static-only"],
        capture_output=True,
        text=True,
        cwd=str(REPO),
    )
    assert f"train.py:{line}:" not in quiet.stdout


def test_python_inf_minus_inf_stays_possible_under_a_python_name():
    src = 'a = float("inf")\nb = float("inf")\nc = a - b\n'
    (v,) = _at(analyze_source("m.py", src), 3, "inf_arith")
    assert v.status is Status.POSSIBLE and v.site.op == "builtins.float.__sub__"


GPT = """import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.register_buffer(
            "bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        )

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return att @ v


def padded(scores, pad):
    scores = scores.masked_fill(pad[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1)


def additive_mask(n):
    return torch.log(torch.tril(torch.ones(n, n)))


class Decoder(nn.Module):
    def __init__(self, dim, max_len=32):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.register_buffer("mask", additive_mask(max_len))

    def forward(self, x):
        T = x.size(1)
        scores = self.q(x) @ x.transpose(-2, -1) + self.mask[:T, :T]
        return torch.softmax(scores, dim=-1)


def fused(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
"""


def test_causal_masks_are_quiet_and_a_padding_mask_is_not():
    verdicts = analyze_source("model.py", GPT)
    assert _at(verdicts, _line_of(GPT, "att = F.softmax(att, dim=-1)"), "softmax") == []
    (pad,) = _at(verdicts, _line_of(GPT, "return torch.softmax(scores, dim=-1)"), "softmax")
    assert pad.status is Status.POSSIBLE  # a sequence of padding only is a whole row of -inf
    (log,) = _at(verdicts, _line_of(GPT, "torch.log(torch.tril("), "log")
    assert log.status is Status.SAFE and "causal mask" in log.reason
    decoder = _line_of(GPT, "        return torch.softmax(scores, dim=-1)")
    assert all(v.status is Status.SAFE for v in _at(verdicts, decoder, "softmax"))
    assert [v for v in verdicts if v.site.span.start_line == _line_of(GPT, "is_causal=True")] == []


def test_a_triangle_that_masks_a_whole_row_is_not_a_causal_mask():
    # below the diagonal only: row 0 of tril(ones, diagonal=-1) is all 0, so `== 0` masks all of it
    src = GPT.replace(
        "torch.tril(torch.ones(block_size, block_size))", "torch.tril(torch.ones(block_size, block_size), -1)"
    )
    (v,) = _at(analyze_source("model.py", src), _line_of(src, "att = F.softmax(att, dim=-1)"), "softmax")
    assert v.status is Status.POSSIBLE


NORMS = """import math

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 5000):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        self.register_buffer("pe", pe)


def inv_freq(dim, base=10000):
    return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    return torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half)


def normalise_returns(rewards, eps=1e-8):
    returns = torch.tensor(rewards)
    return (returns - returns.mean()) / (returns.std() + eps)
"""


def test_module_constants_position_encodings_and_std_plus_eps():
    verdicts = analyze_source("norms.py", NORMS)
    (rsqrt,) = _at(verdicts, _line_of(NORMS, "torch.rsqrt("), "rsqrt")
    assert rsqrt.status is Status.SAFE
    pe_line = _line_of(NORMS, "div_term = torch.exp(")
    assert [v.status for v in _at(verdicts, pe_line, "exp")] == [Status.SAFE]
    assert all(v.status is Status.SAFE for v in _at(verdicts, pe_line, "div"))
    freq_line = _line_of(NORMS, "return 1.0 / (base **")
    freq = [v for v in verdicts if v.site.span.start_line == freq_line]
    assert freq and all(v.status is Status.SAFE for v in freq), [(v.site.op, v.reason) for v in freq]
    ts_line = _line_of(NORMS, "return torch.exp(-math.log(max_period)")
    ts = [v for v in verdicts if v.site.span.start_line == ts_line]
    assert ts and all(v.status is Status.SAFE for v in ts), [(v.site.op, v.reason) for v in ts]
    norm_line = _line_of(NORMS, "(returns.std() + eps)")
    (std,) = _at(verdicts, norm_line, "var")
    assert std.status is Status.POSSIBLE  # an episode of one step: the std of one element is NaN
    (div,) = _at(verdicts, norm_line, "div")
    assert div.status is Status.SAFE  # a finite std is >= 0, so the divisor is >= eps


def test_what_is_real_stays_possible():
    src = """import torch


def sample(logits, temperature):
    return torch.exp(logits / temperature)


def reparameterize(mu, logvar):
    return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)


def degree_scale(deg):
    return 1.0 / torch.sqrt(deg)


def soft_margin(margin):
    return torch.log1p(torch.exp(margin))
"""
    verdicts = analyze_source("real.py", src)
    for needle, kind in (
        ("logits / temperature", "exp"),
        ("logits / temperature", "div"),
        ("torch.exp(0.5 * logvar)", "exp"),
        ("torch.sqrt(deg)", "div"),
        ("torch.log1p(torch.exp(margin))", "exp"),
    ):
        got = _at(verdicts, _line_of(src, needle), kind)
        assert got and all(v.status is Status.POSSIBLE for v in got), (needle, kind)


def test_real_projects_corpus_meets_its_goals():
    sys.path.insert(0, str(REPO / "bench"))
    import real_projects

    tally = real_projects.Tally()
    for path in sorted(real_projects.ROOT.rglob("*.py")):
        real_projects.tally_file(path, tally)
    assert tally.files >= 30
    assert tally.missed == []
    assert tally.true_positives / tally.possible >= 0.6, tally.false_alarms
