"""Heteroscedastic regression: the network predicts a mean and a variance."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MeanVarianceNet(nn.Module):
    def __init__(self, n_in=4, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, 1)
        self.raw_var = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.body(x)
        # softplus keeps the variance >= 0 but rounds to exactly 0 below about -104.
        return self.mu(h).squeeze(1), F.softplus(self.raw_var(h)).squeeze(1)


def gaussian_nll(mu, var, y):
    nll = 0.5 * (torch.log(var) + (y - mu) ** 2 / var)  # expect: confirmed log, confirmed div
    return nll.mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = MeanVarianceNet()
    x = torch.randn(64, 4)
    y = x.sum(1) + 0.1 * torch.randn(64)
    mu, var = net(x)
    print(gaussian_nll(mu, var, y).item())
