"""A hand-written LayerNorm, as in many from-scratch transformer implementations.

The variance is the biased one over the feature dimension and eps sits inside
the square root, so neither the root nor the division can fail.
"""

import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = 1e-5

    def forward(self, x):
        # Means over the feature dimension: NaN only for a zero-width input.
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return self.weight * (x - mu) / torch.sqrt(var + self.eps) + self.bias  # expect: safe div, safe sqrt


class Block(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.norm = LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(4, 10, 32)
    print(block(x).shape, block(x).abs().max().item())
