"""Unbiased variance of a batch of one is NaN."""
import torch


def spread(x):
    a = torch.std(x)  # expect: torch.std@8 possible
    b = x.var(dim=0)  # expect: torch.Tensor.var@8 possible
    c = torch.var_mean(x)  # expect: torch.var_mean@8 possible
    d = x.std(unbiased=True)  # expect: torch.Tensor.std@8 possible
    return a, b, c, d
