"""logit of clamped probabilities."""
import torch


def inverse(p):
    a = torch.logit(p.clamp(1e-6, 1 - 1e-6))  # expect: torch.logit@8 safe
    b = torch.special.logit(torch.rand(3) * 0.5 + 0.25)  # expect: torch.special.logit@8 safe
    return a, b


def inverse_eps(z):
    p = torch.sigmoid(z)
    c = torch.logit(p, eps=1e-6)  # expect: torch.logit@8 safe
    d = p.logit(1e-6)  # expect: torch.Tensor.logit@8 safe
    e = torch.logit(p, eps=None)  # expect: torch.logit@8 possible
    return c, d, e
