"""Reflected operators and what is not a tensor op at all."""
import torch


def inverse(x, xs):
    n = len(xs)
    a = 1 / x  # expect: torch.Tensor.__rtruediv__@8 possible
    b = 2.0 / (x.abs() + 1)  # expect: torch.Tensor.__rtruediv__@8 safe
    c = 1 // x  # expect: torch.Tensor.__rfloordiv__@8 possible
    half = n / 2  # expect: builtins.float.__truediv__@11 safe
    label = "%d items" % n
    k = 7 % 3
    return a, b, c, half, label, k
