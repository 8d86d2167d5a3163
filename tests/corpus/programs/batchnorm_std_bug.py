"""Tabular regression with features standardised by the batch's own statistics.

The usual shortcut (x - x.mean(0)) / x.std(0) breaks on a batch of one sample
(std with Bessel's correction is NaN) and on a column that is constant within
the batch (a rare one-hot category, a sensor stuck at 0): std 0.
"""

import torch
import torch.nn as nn


def standardise(x):
    # An empty batch makes this mean NaN too.
    mean = x.mean(0, keepdim=True)
    std = x.std(0, keepdim=True)  # expect: confirmed var
    return (x - mean) / std  # expect: confirmed div


class Regressor(nn.Module):
    def __init__(self, n_features=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(standardise(x)).squeeze(1)


def mse(pred, y):
    return ((pred - y) ** 2).mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Regressor()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 8)
    y = x[:, 0] * 2.0 - x[:, 3]
    for step in range(10):
        loss = mse(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("loss", loss.item())
