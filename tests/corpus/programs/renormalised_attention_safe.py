"""Renormalised attention with every weight smoothed by a small positive constant.

A softmax output times a keep factor in [0, 1], plus 1e-6, is at least 1e-6, so
each row's sum is positive: a fully dropped row becomes uniform instead of NaN.
"""

import torch


def renormalise(scores, keep):
    attn = torch.softmax(scores, dim=-1) * keep.clamp(0.0, 1.0) + 1e-6
    return attn / attn.sum(-1, keepdim=True)  # expect: safe div


def smoothed_targets(teacher_logits, eps=1e-6):
    """Distillation targets with a floor on every class probability."""
    p = torch.softmax(teacher_logits, dim=-1) + eps
    return p / p.sum(-1, keepdim=True)  # expect: safe div


if __name__ == "__main__":
    torch.manual_seed(0)
    print(renormalise(torch.randn(4, 6), torch.zeros(4, 6)).sum(-1), smoothed_targets(torch.randn(2, 5)).sum(-1))
