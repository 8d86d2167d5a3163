"""Focal loss: log of the true-class probability."""
import torch


def focal(logits, target, gamma=2.0):
    p = torch.sigmoid(logits)
    p_t = p * target + (1 - p) * (1 - target)
    bad = -((1 - p_t) ** gamma) * torch.log(p_t)  # expect: torch.Tensor.__pow__@12 safe; torch.log@34 possible
    good = -torch.log(p_t.clamp(min=1e-6))  # expect: torch.log@12 safe
    return bad, good
