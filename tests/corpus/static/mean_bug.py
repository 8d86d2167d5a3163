"""Means of selections that can be empty."""
import torch


def masked_mean(x, mask):
    a = x[mask].mean()  # expect: torch.Tensor.mean@8 possible
    b = torch.mean(x[x > 0])  # expect: torch.mean@8 possible
    c = x.nanmean()  # expect: torch.Tensor.nanmean@8 possible
    return a, b, c
