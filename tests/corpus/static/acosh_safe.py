"""Poincare-ball distance style: 1 + a square."""
import torch


def hyperbolic(x):
    a = torch.acosh(1 + x ** 2)  # expect: torch.acosh@8 safe
    b = torch.acosh(x.clamp_min(1.0))  # expect: torch.acosh@8 safe
    return a, b
