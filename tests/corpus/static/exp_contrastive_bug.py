"""InfoNCE by hand: exp of raw similarities and log of their sum."""
import torch


def info_nce(z):
    s = z @ z.t() / 0.5  # expect: torch.Tensor.__truediv__@8 safe
    e = torch.exp(s)  # expect: torch.exp@8 possible
    return -torch.log(e.diagonal() / e.sum(-1))  # expect: torch.log@12 possible; torch.Tensor.__truediv__@22 possible
