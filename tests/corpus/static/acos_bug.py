"""Angles from dot products of normalised vectors: rounding exceeds 1."""
import math

import torch
import torch.nn.functional as F


def angle(a, b, v):
    a_n = F.normalize(a, dim=-1)
    b_n = F.normalize(b, dim=-1)
    t1 = torch.acos((a_n * b_n).sum(-1))  # expect: torch.acos@9 possible
    t2 = torch.acos(F.cosine_similarity(a, b))  # expect: torch.acos@9 possible
    t3 = a.asin()  # expect: torch.Tensor.asin@9 possible
    t4 = math.acos(v)  # expect: math.acos@9 safe
    return t1, t2, t3, t4
