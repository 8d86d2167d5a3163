"""Hand-written cross-entropy: log of a softmax that underflows to 0."""
import torch
import torch.nn.functional as F


def cross_entropy(logits, y):
    p = F.softmax(logits, dim=-1)
    return -(y * torch.log(p)).sum(-1)  # expect: torch.log@17 possible
