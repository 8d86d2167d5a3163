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


def function_forms(x):
    w = torch.ones(3)
    torch.nn.init.zeros_(w)
    a = x / w  # expect: torch.Tensor.__truediv__@8 possible
    v = x.abs()
    torch.clamp_(v, min=1e-3)
    b = torch.log(v)  # expect: torch.log@8 safe
    u = torch.ones(3)
    torch.nn.init.uniform_(u, -1.0, 1.0)
    c = x / u  # expect: torch.Tensor.__truediv__@8 possible
    return a, b, c
