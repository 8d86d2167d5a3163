"""Guards by if statements and asserts refine what follows."""
import torch


def normalise(x: torch.Tensor):
    norm = x.norm()
    if norm == 0:
        return x
    return x / norm  # expect: torch.Tensor.__truediv__@11 safe


def scale(x: torch.Tensor, d):
    if d > 0:
        y = x / d  # expect: torch.Tensor.__truediv__@12 safe
    else:
        y = x / d  # expect: torch.Tensor.__truediv__@12 possible
    return y


def checked(x: torch.Tensor, s):
    assert s > 1e-6, "scale too small"
    return torch.log(s) + x  # expect: torch.log@11 safe


def loop(xs: torch.Tensor, d):
    out = []
    for x in xs:
        if d == 0:
            continue
        out.append(x / d)  # expect: torch.Tensor.__truediv__@19 safe
    return out


def unguarded_after_loop(xs: torch.Tensor):
    d = torch.ones(1)
    for x in xs:
        d = torch.zeros(1)
        if x.sum() > 0:
            continue
        d = torch.ones(1)
    return xs[0] / d  # expect: torch.Tensor.__truediv__@11 possible


def reductions(x: torch.Tensor, d, e, g):
    if d.min() > 0:
        a = torch.log(d)  # expect: torch.log@12 safe
    if (e > 1e-6).all():
        b = x / e  # expect: torch.Tensor.__truediv__@12 safe
    if g.abs().min() > 0:
        c = x / g  # expect: torch.Tensor.__truediv__@12 safe
    if d.max() > 0:
        h = torch.log(d)  # expect: torch.log@12 possible
    if (e <= 0).any():
        return x
    return a + b + c + h + torch.log(e)  # expect: torch.log@27 safe


def halving(x: torch.Tensor, d):
    while d > 1e-3:
        x = x / d  # expect: torch.Tensor.__truediv__@12 safe
        d = d / 2  # expect: builtins.float.__truediv__@12 safe
    return x / d  # expect: torch.Tensor.__truediv__@11 possible
