"""Gaussian NLL with the variance clamped, as torch.nn.GaussianNLLLoss does."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MeanVarianceNet(nn.Module):
    def __init__(self, n_in=4, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 2)

    def forward(self, x):
        mu, raw = self.head(self.body(x)).unbind(1)
        return mu, F.softplus(raw)


def gaussian_nll(mu, var, y):
    var = var.clamp(min=1e-6)
    nll = 0.5 * (torch.log(var) + (y - mu) ** 2 / var)  # expect: safe log, safe div
    return nll.mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = MeanVarianceNet()
    x = torch.randn(64, 4)
    mu, var = net(x)
    print(gaussian_nll(mu, var, x.sum(1)).item())
