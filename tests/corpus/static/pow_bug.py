"""Fractional and negative powers of unbounded bases."""
import torch


def powers(x, y, p):
    a = x ** 0.5  # expect: torch.Tensor.__pow__@8 possible
    b = x.pow(-1)  # expect: torch.Tensor.pow@8 possible
    c = torch.pow(x - y, 1.5)  # expect: torch.pow@8 possible
    d = x ** p  # expect: torch.Tensor.__pow__@8 possible
    return a, b, c, d
