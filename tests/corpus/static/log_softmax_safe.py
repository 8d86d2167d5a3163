"""The same loss, guarded with eps, and the library's safe form."""
import torch
import torch.nn.functional as F


def cross_entropy(logits, y):
    p = F.softmax(logits, dim=-1)
    return -(y * torch.log(p + 1e-10)).sum(-1)  # expect: torch.log@17 safe


def cross_entropy_lib(logits, y):
    return -(y * F.log_softmax(logits, dim=-1)).sum(-1)
