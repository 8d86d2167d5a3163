"""Gamma-family functions at their poles."""
import torch


def beta_terms(x, alpha):
    a = torch.lgamma(x)  # expect: torch.lgamma@8 possible
    b = x.digamma()  # expect: torch.Tensor.digamma@8 possible
    c = torch.special.gammaln(alpha - 1)  # expect: torch.special.gammaln@8 possible
    d = torch.polygamma(1, x)  # expect: torch.polygamma@8 possible
    return a, b, c, d
