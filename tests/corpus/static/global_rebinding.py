"""A module constant rebound elsewhere no longer proves anything."""
import torch

EPS = 1e-8
SCALE = 1e-6


def disable():
    global EPS
    EPS = 0.0


def f(x):
    a = x / (x.abs() + EPS)  # expect: torch.Tensor.__truediv__@8 possible
    b = x / (x.abs() + SCALE)  # expect: torch.Tensor.__truediv__@8 safe
    return a, b
