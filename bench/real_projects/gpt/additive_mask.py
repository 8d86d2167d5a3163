"""A decoder that builds its causal mask as an additive matrix: log of a 0/1 lower triangle."""
import torch
import torch.nn as nn


def causal_mask(size):
    return torch.log(torch.tril(torch.ones(size, size)))  # expect: safe log


class TinyDecoder(nn.Module):
    def __init__(self, dim, max_len=32):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.scale = dim ** -0.5  # expect: safe pow
        self.register_buffer("mask", causal_mask(max_len))

    def forward(self, x):
        T = x.size(1)
        scores = self.q(x) @ self.k(x).transpose(-2, -1) * self.scale
        scores = scores + self.mask[:T, :T]
        return torch.softmax(scores, dim=-1) @ x  # expect: safe softmax
