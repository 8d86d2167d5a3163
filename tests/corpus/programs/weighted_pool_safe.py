"""Weighted average pooling with the divisor floored by a positive tensor."""

import torch
import torch.nn as nn

EPS = torch.tensor(1e-6)


class WeightedPool(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x):
        w = torch.relu(self.score(x))
        # A floor of 1e-6 made on the weights' own device and dtype: the divisor is at least that.
        denom = torch.max(w.sum(1), w.new_tensor([1e-6]))
        return (w * x).sum(1) / denom  # expect: safe div


def normalise_rows(w):
    """Rows of non-negative weights scaled to sum to one; an all-zero row stays zero."""
    return w / w.sum(-1, keepdim=True).clamp(min=EPS)  # expect: safe div


if __name__ == "__main__":
    torch.manual_seed(0)
    pool = WeightedPool()
    print(pool(torch.randn(4, 6, 16)).shape, normalise_rows(torch.zeros(3, 5)).sum(-1))
