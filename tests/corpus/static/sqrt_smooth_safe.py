"""Smooth L1 / Charbonnier: sqrt of a square plus eps (from a default parameter)."""
import torch


def charbonnier(x, y, eps=1e-6):
    return torch.sqrt((x - y) ** 2 + eps).mean()  # expect: torch.sqrt@11 safe


def smooth_norm(x, eps=1e-8):
    return torch.sqrt(x ** 2 + eps)  # expect: torch.sqrt@11 safe
