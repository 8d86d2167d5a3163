"""Weighted average pooling of token features by non-negative relevance weights.

The weights come out of a ReLU, so a sequence whose scores are all negative has
a zero weight sum. The floor meant to guard the divisor is a zero tensor: it
keeps the denominator non-negative, not non-zero, and the pooled row is 0 / 0.
"""

import torch
import torch.nn as nn


class WeightedPool(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x):
        w = torch.relu(self.score(x))  # (batch, tokens, 1)
        denom = torch.maximum(w.sum(1), w.new_zeros(1))
        # Every score of a sequence negative: all its weights are 0, and so is the floor.
        return (w * x).sum(1) / denom  # expect: confirmed div


def normalise_rows(w):
    """Rows of non-negative weights scaled to sum to one."""
    # clamp(min=0) on a sum of non-negative weights changes nothing: an all-zero row is 0 / 0.
    return w / w.sum(-1, keepdim=True).clamp(min=torch.tensor(0.0))  # expect: confirmed div


if __name__ == "__main__":
    torch.manual_seed(0)
    pool = WeightedPool()
    print(pool(torch.randn(4, 6, 16)).shape, normalise_rows(torch.rand(3, 5)).sum(-1))
