"""Softmax of masked scores: a row whose entries are all -inf gives NaN. Only an operand
that may hold -inf makes a softmax a site; a large finite fill gives a uniform row instead."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def padded(scores, mask, lengths):
    a = scores.masked_fill(~mask, float("-inf")).softmax(-1)  # expect: torch.Tensor.softmax@8 possible
    b = torch.softmax(scores.masked_fill(mask == 0, -math.inf), dim=-1)  # expect: torch.softmax@8 possible
    s = scores.clone()
    s[lengths == 0] = -torch.inf
    c = F.log_softmax(s, dim=-1)  # expect: torch.nn.functional.log_softmax@8 possible
    n = scores.shape[-1]
    causal = torch.full((n, n), float("-inf")).triu(1)
    d = torch.log_softmax(scores + causal, -1)  # expect: torch.log_softmax@8 possible
    return a, b, c, d


def _normalize(s):
    return s.softmax(dim=-1)  # expect: torch.Tensor.softmax@11 possible


def through_a_helper(scores, mask):
    return _normalize(scores.masked_fill_(mask, float("-inf")))


def finite_fills(scores, mask, logits):
    a = scores.masked_fill(~mask, -1e9).softmax(-1)
    b = F.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)
    c = logits.softmax(-1) + F.log_softmax(logits, dim=1)
    return a, b, c


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, pad):
        scores = self.proj(x) @ x.transpose(-1, -2)
        scores.masked_fill_(pad, float("-inf"))
        return scores.softmax(-1), self.proj(x).softmax(-1)  # expect: torch.Tensor.softmax@15 possible
