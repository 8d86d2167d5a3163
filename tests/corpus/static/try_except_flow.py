"""Exceptions can leave a try body anywhere: both values reach the handler's use."""
import torch


def f(x, path):
    d = torch.ones(3)
    try:
        d = torch.load(path)
    except OSError:
        pass
    a = x / d  # expect: torch.Tensor.__truediv__@8 possible
    e = torch.ones(3)
    try:
        y = x.sum()
    finally:
        e = e + 1
    b = x / e  # expect: torch.Tensor.__truediv__@8 safe
    return a, b, y
