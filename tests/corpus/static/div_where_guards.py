"""Divisors guarded by torch.where / masked_fill, and an unguarded twin."""
import torch


def ratio(x, d, mask):
    a = x / torch.where(d == 0, torch.ones_like(d), d)  # expect: torch.Tensor.__truediv__@8 safe
    b = x / d.masked_fill(d == 0, 1.0)  # expect: torch.Tensor.__truediv__@8 safe
    c = torch.log(torch.where(x > 0, x, 1))  # expect: torch.log@8 safe
    e = x / torch.where(mask, d, 1.0)  # expect: torch.Tensor.__truediv__@8 possible
    f = torch.where(x > 0, torch.log(x), 0.0)  # expect: torch.log@27 possible
    return a, b, c, e, f
