"""Division through functions and methods."""
import torch


def ops(x, y, a, b):
    u = x.div(y)  # expect: torch.Tensor.div@8 possible
    r = torch.rand(3)
    v = torch.div(x, r + 1)  # expect: torch.div@8 safe
    w = torch.true_divide(a, b)  # expect: torch.true_divide@8 possible
    z = x.reciprocal()  # expect: torch.Tensor.reciprocal@8 possible
    f = torch.fmod(x, 3.0)  # expect: torch.fmod@8 safe
    x.div_(y)  # expect: torch.Tensor.div_@4 possible
    return u, v, w, z, f
