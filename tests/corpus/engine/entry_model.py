"""A module that needs an explicit entry (its forward takes two tensors)."""
import torch
import torch.nn as nn


class Similarity(nn.Module):
    def forward(self, a, b):
        dot = (a * b).sum(dim=-1)
        cos = dot / (a.norm(dim=-1) * b.norm(dim=-1))  # bug: a zero vector divides by zero
        safe = dot / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-8)  # safe: divisor >= 1e-8
        return cos + 0.0 * safe


def make():
    torch.manual_seed(1)
    return Similarity(), (torch.randn(4, 6), torch.randn(4, 6))
