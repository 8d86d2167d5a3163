"""Entropy terms: library forms are not sites, a clamped log is safe."""
import torch


def entropy(logits):
    p = logits.softmax(-1)
    a = torch.special.entr(p).sum(-1)
    b = -torch.xlogy(p, p).sum(-1)
    c = -(p * torch.log(p.clamp_min(1e-12))).sum(-1)  # expect: torch.log@14 safe
    d = -(p * p.log()).sum(-1)  # expect: torch.Tensor.log@14 possible
    return a, b, c, d
