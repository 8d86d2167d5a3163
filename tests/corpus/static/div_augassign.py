"""Augmented division statements."""
import torch


def average(x: torch.Tensor, n, m, loss: torch.Tensor, counts):
    x /= n  # expect: torch.Tensor.__itruediv__@4 possible
    loss /= max(len(counts), 1)  # expect: torch.Tensor.__itruediv__@4 safe
    x //= 2  # expect: torch.Tensor.__ifloordiv__@4 safe
    x %= m  # expect: torch.Tensor.__imod__@4 possible
    total = 0
    total //= 4  # expect: builtins.float.__floordiv__@4 safe
    return x, loss, total


class Accumulator:
    def __init__(self):
        self.total = torch.zeros(3)

    def normalise(self, x: torch.Tensor, d):
        self.total /= d  # expect: torch.Tensor.__itruediv__@8 possible
        x[0] /= 2  # expect: torch.Tensor.__itruediv__@8 safe
        x **= 0.5  # expect: torch.Tensor.__ipow__@8 possible
        return x
