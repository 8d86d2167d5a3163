"""Modules with no script part: the engine must probe them with synthesized inputs."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GaussianHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.Linear(8, 4)
        self.var = nn.Linear(8, 4)

    def forward(self, h):
        mu = self.mean(h)
        std = torch.sqrt(self.var(h))  # bug: a linear output can be negative
        safe_std = torch.sqrt(F.softplus(self.var(h)) + 1e-6)  # safe: operand >= 1e-6
        return mu, std, safe_std


class BatchStandardize(nn.Module):
    def forward(self, x):
        spread = x.std(dim=0)  # bug: one row in the batch -> NaN (correction 1)
        safe_spread = x.std(dim=0, correction=0)  # safe: 0 for one row, never NaN
        return (x - x.mean(dim=0)) / (spread + 1e-5) + 0.0 * safe_spread


class LearnedTemperature(nn.Module):
    """Inputs cannot reach the bug: only a trained temperature can hit zero."""

    def __init__(self):
        super().__init__()
        self.temperature = nn.Parameter(torch.ones(4))

    def forward(self, logits):
        return logits / self.temperature  # bug: the learned temperature can reach 0
