"""Poisson regression of event counts with a ReLU rate head.

The ReLU rate is 0 for any input on its dead side, which the plain Poisson NLL
cannot take; the "stable" variant adds a small constant first.
"""

import torch
import torch.nn as nn


class RateNet(nn.Module):
    def __init__(self, n_in=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 16), nn.Tanh(), nn.Linear(16, 1), nn.ReLU())

    def forward(self, x):
        return self.net(x).squeeze(1)


def poisson_nll(rate, counts):
    return (rate - counts * torch.log(rate)).sum()  # expect: confirmed log


def poisson_nll_stable(rate, counts):
    # rate comes out of a ReLU here, so rate + 1e-8 >= 1e-8.
    rate = torch.relu(rate)
    return (rate - counts * torch.log(rate + 1e-8)).sum()  # expect: safe log


if __name__ == "__main__":
    torch.manual_seed(0)
    net = RateNet()
    x = torch.randn(32, 6)
    counts = torch.poisson(torch.full((32,), 3.0))
    with torch.no_grad():
        net.net[2].bias.fill_(2.0)
    rate = net(x)
    print(poisson_nll(rate, counts).item(), poisson_nll_stable(rate, counts).item())
