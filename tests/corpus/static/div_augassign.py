"""Augmented division statements."""
import torch


def average(x, n, m, loss, counts):
    x /= n  # expect: torch.Tensor.__itruediv__@4 possible
    loss /= max(len(counts), 1)  # expect: torch.Tensor.__itruediv__@4 safe
    x //= 2  # expect: torch.Tensor.__ifloordiv__@4 safe
    x %= m  # expect: torch.Tensor.__imod__@4 possible
    total = 0
    total //= 4
    return x, loss, total
