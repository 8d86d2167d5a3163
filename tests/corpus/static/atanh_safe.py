"""atanh of clamped operands."""
import torch


def inverse(x):
    a = torch.atanh(x.clamp(-1 + 1e-6, 1 - 1e-6))  # expect: torch.atanh@8 safe
    b = torch.atanh(torch.rand(3) * 0.5)  # expect: torch.atanh@8 safe
    return a, b
