"""logit of a sigmoid output reaches 0 and 1."""
import torch


def inverse(z):
    p = torch.sigmoid(z)
    a = torch.logit(p)  # expect: torch.logit@8 possible
    b = p.logit()  # expect: torch.Tensor.logit@8 possible
    return a, b
