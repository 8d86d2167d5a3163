"""Clamped and bounded arguments."""
import torch


def angle(x):
    t1 = torch.acos(x.clamp(-1 + 1e-7, 1 - 1e-7))  # expect: torch.acos@9 safe
    t2 = torch.arcsin(torch.tanh(x) * 0.5)  # expect: torch.arcsin@9 safe
    t3 = torch.acos(torch.sin(x) * 0.99)  # expect: torch.acos@9 safe
    return t1, t2, t3
