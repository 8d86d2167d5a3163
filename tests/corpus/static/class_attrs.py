"""Class attributes set in __init__ or any method, read as self.x."""
import torch
import torch.nn as nn


class Scaler(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.scale = 1.0

    def reset(self):
        self.scale = 0.0

    def forward(self, x):
        a = x / (x.norm() + self.eps)  # expect: torch.Tensor.__truediv__@12 safe
        b = x / self.scale  # expect: torch.Tensor.__truediv__@12 possible
        return a, b


class Norm(nn.Module):
    eps = 1e-5

    def forward(self, x):
        return x / (x.abs().amax() + self.eps)  # expect: torch.Tensor.__truediv__@15 safe
