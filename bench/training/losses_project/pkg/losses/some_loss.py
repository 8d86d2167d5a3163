"""Hellinger distance between predicted class probabilities and a target distribution's roots."""
import torch
import torch.nn.functional as F


def hellinger_loss(logits, target_root):
    root = torch.sqrt(F.softmax(logits, dim=-1))  # expect: confirmed sqrt
    return ((root - target_root) ** 2).sum(dim=-1).mean() / 2**0.5
