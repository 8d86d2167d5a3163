"""Exponentials of bounded operands."""
import math

import torch
import torch.nn.functional as F

TEMPERATURE = 0.07


def bounded(x, a, b, xs):
    u = torch.exp(-x.abs())  # expect: torch.exp@8 safe
    v = torch.sigmoid(x).exp()  # expect: torch.Tensor.exp@8 safe
    sim = F.cosine_similarity(a, b, dim=-1)
    w = torch.exp(sim / TEMPERATURE)  # expect: torch.exp@8 safe; torch.Tensor.__truediv__@18 safe
    d = len(xs)
    k = math.exp(-d)  # expect: math.exp@8 safe
    return u, v, w, k
