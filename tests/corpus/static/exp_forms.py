"""The other exponential-like ops."""
import torch


def forms(x):
    a = torch.expm1(x)  # expect: torch.expm1@8 possible
    b = torch.special.exp2(x)  # expect: torch.special.exp2@8 possible
    c = x.cosh()  # expect: torch.Tensor.cosh@8 possible
    d = 2 ** x  # expect: torch.Tensor.__rpow__@8 possible
    e = torch.sinh(torch.tanh(x))  # expect: torch.sinh@8 safe
    return a, b, c, d, e
