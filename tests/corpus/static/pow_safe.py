"""Powers that cannot fail, and integer powers that are not sites."""
import torch

EPS = 1e-6


def powers(x, d):
    a = x ** 2
    b = x.pow(3)
    c = x.abs() ** 0.5  # expect: torch.Tensor.__pow__@8 safe
    e = (x.pow(2) + EPS) ** -0.5  # expect: torch.Tensor.__pow__@8 safe
    f = torch.pow(d.clamp_min(1e-6), -1)  # expect: torch.pow@8 safe
    x **= 2
    return a, b, c, e, f
