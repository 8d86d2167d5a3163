"""log of clamped operands: function imported from torch, module constant eps."""
import torch
from torch import log

EPS = 1e-8


def nll(x, p):
    a = log(x.clamp_min(1e-8))  # expect: torch.log@8 safe
    b = log(torch.clamp(p, min=EPS))  # expect: torch.log@8 safe
    c = log(torch.clamp(p, max=1.0))  # expect: torch.log@8 possible
    return a + b + c
