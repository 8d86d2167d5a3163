"""Sites spanning lines and inside parentheses."""
import torch


def f(x, y):
    a = torch.log(  # expect: torch.log@8 possible
        x
    )
    b = (x / y)  # expect: torch.Tensor.__truediv__@9 possible
    c = (
        x.sqrt()  # expect: torch.Tensor.sqrt@8 possible
    )
    return a, b, c
