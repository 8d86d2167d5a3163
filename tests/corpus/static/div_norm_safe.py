"""Guarded normalisation."""
import torch
import torch.nn.functional as F


def normalise(x):
    a = x / (x.norm(dim=-1, keepdim=True) + 1e-8)  # expect: torch.Tensor.__truediv__@8 safe
    b = x / x.norm().clamp_min(1e-12)  # expect: torch.Tensor.__truediv__@8 safe
    c = F.normalize(x, dim=-1)
    w = x.abs()
    d = w / (w.sum(-1, keepdim=True) + 1e-6)  # expect: torch.Tensor.__truediv__@8 safe
    return a, b, c, d
