"""Normalising by a norm or a sum that can be 0."""
import torch


def normalise(x):
    a = x / x.norm(dim=-1, keepdim=True)  # expect: torch.Tensor.__truediv__@8 possible
    b = x / x.sum()  # expect: torch.Tensor.__truediv__@8 possible
    w = x.abs()
    c = w / w.sum(-1, keepdim=True)  # expect: torch.Tensor.__truediv__@8 possible
    return a, b, c
