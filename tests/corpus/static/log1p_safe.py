"""log1p of non-negative values."""
import torch


def softplus_by_hand(x):
    p = torch.rand(4)
    a = torch.special.log1p(p)  # expect: torch.special.log1p@8 safe
    b = torch.log1p(x.exp())  # expect: torch.log1p@8 safe; torch.Tensor.exp@20 possible
    c = (x ** 2).log1p()  # expect: torch.Tensor.log1p@8 safe
    return a + b + c
