"""Reaching definitions: the last assignment wins, branches join."""
import torch


def run(x, flag):
    d = x.abs().sum() + 1e-8
    a = x / d  # expect: torch.Tensor.__truediv__@8 safe
    d = x.sum()
    b = x / d  # expect: torch.Tensor.__truediv__@8 possible
    if flag:
        e = 1e-6
    else:
        e = 0.0
    c = x / (x.abs() + e)  # expect: torch.Tensor.__truediv__@8 possible
    g = torch.ones(3)
    g[0] = 0
    h = x / g  # expect: torch.Tensor.__truediv__@8 possible
    return a, b, c, h
