"""Constants imported from elsewhere are unknown; class constants read through the class are known."""
import torch
from config import EPS, SCALE

import settings


class Norm:
    EPS = 1e-5


def f(x: torch.Tensor):
    a = EPS / x  # expect: torch.Tensor.__truediv__@8 possible
    b = x / (x.abs() + settings.EPS)  # expect: torch.Tensor.__truediv__@8 possible
    c = x / (x.abs() + Norm.EPS)  # expect: torch.Tensor.__truediv__@8 safe
    d = torch.log(SCALE)  # expect: torch.log@8 possible
    return a, b, c, d
