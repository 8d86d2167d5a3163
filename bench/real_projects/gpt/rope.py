"""Rotary position embeddings."""
import torch


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))  # expect: safe div, safe pow, safe div, safe div
    t = torch.arange(end)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def inv_frequencies(head_dim, base=10000):
    return 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))  # expect: safe div, safe pow, safe div


def apply_rotary(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
