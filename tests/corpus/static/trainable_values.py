"""Trainable values move during training: their initial value proves nothing."""
import torch
import torch.nn as nn


class Temperature(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Parameter(torch.ones(1))
        self.u = torch.tensor(0.5, requires_grad=True)
        self.v = torch.tensor(0.5)

    def forward(self, x):
        a = x / self.t  # expect: torch.Tensor.__truediv__@12 possible
        b = x / self.u  # expect: torch.Tensor.__truediv__@12 possible
        c = x / self.v  # expect: torch.Tensor.__truediv__@12 safe
        w = torch.ones(3).requires_grad_()
        d = x / w  # expect: torch.Tensor.__truediv__@12 possible
        return a, b, c, d


def free_parameter(x):
    w = torch.nn.Parameter(torch.ones(3))
    layer = nn.Linear(3, 3)
    return w / x, layer  # expect: torch.Tensor.__truediv__@11 possible
