"""Positive operands keep lgamma/digamma away from the poles."""
import torch
import torch.nn.functional as F


def beta_terms(x):
    a = torch.lgamma(F.softplus(x) + 1e-4)  # expect: torch.lgamma@8 safe
    b = torch.digamma(x.exp() + 1)  # expect: torch.digamma@8 safe; torch.Tensor.exp@22 possible
    return a, b
