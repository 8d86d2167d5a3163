"""In-place methods redefine their receiver, inside expressions too."""
import torch


def guarded(x):
    d = x.abs()
    d.clamp_(min=1e-6)
    a = torch.log(d)  # expect: torch.log@8 safe
    e = x.abs() + 1
    z = e.mul_(0) + 1
    b = x / e  # expect: torch.Tensor.__truediv__@8 possible
    f = torch.ones(3)
    f.zero_()
    c = x / f  # expect: torch.Tensor.__truediv__@8 possible
    return a, b, c, z
