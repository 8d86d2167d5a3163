"""acosh below 1."""
import torch


def hyperbolic(x):
    a = torch.acosh(x)  # expect: torch.acosh@8 possible
    b = (1 + x).acosh()  # expect: torch.Tensor.acosh@8 possible
    return a, b
