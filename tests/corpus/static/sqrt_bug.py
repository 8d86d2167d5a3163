"""Square roots of differences."""
import math

import torch


def dist(x, y, a, b, d):
    u = torch.sqrt(x - y)  # expect: torch.sqrt@8 possible
    v = (a - b).sqrt()  # expect: torch.Tensor.sqrt@8 possible
    w = math.sqrt(d)  # expect: math.sqrt@8 safe
    return u + v + w
