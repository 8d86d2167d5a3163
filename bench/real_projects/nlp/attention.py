"""Additive (Bahdanau) attention over encoder states with a length mask."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AdditiveAttention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.W = nn.Linear(2 * hidden, hidden)
        self.v = nn.Linear(hidden, 1, bias=False)

    def forward(self, query, keys, lengths):
        T = keys.size(1)
        q = query[:, None, :].expand(-1, T, -1)
        scores = self.v(torch.tanh(self.W(torch.cat([q, keys], dim=-1)))).squeeze(-1)
        mask = torch.arange(T)[None, :] >= lengths[:, None]
        scores = scores.masked_fill(mask, float("-inf"))
        return F.softmax(scores, dim=-1)  # expect: possible softmax


def scaled_dot(q, k, v):
    d = q.size(-1)
    att = q @ k.transpose(-2, -1) / d ** 0.5  # expect: safe div, safe pow
    return att.softmax(-1) @ v
