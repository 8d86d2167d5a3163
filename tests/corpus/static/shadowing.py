"""Local names that shadow op names are not ops."""
import math

import torch


def sqrt(v):
    return v


def run(x):
    log = lambda v: v  # noqa: E731
    a = log(x)
    b = sqrt(x)
    c = math.sqrt(2)
    d = torch.log(x)  # expect: torch.log@8 possible
    return a, b, c, d


def guarded_module(x, n):
    if torch == n:
        pass
    return torch.log(x)  # expect: torch.log@11 possible


if torch == math:
    pass
y = torch.log(torch.rand(2))  # expect: torch.log@4 possible
