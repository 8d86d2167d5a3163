"""Group normalisation and weight standardisation."""
import torch
import torch.nn as nn


class GroupNorm(nn.Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5):
        super().__init__()
        assert num_channels % num_groups == 0  # expect: safe div
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(1, num_channels, 1, 1))
        self.bias = nn.Parameter(torch.zeros(1, num_channels, 1, 1))

    def forward(self, x):
        N, C, H, W = x.shape
        g = x.view(N, self.num_groups, -1)
        mean = g.mean(-1, keepdim=True)
        var = ((g - mean) ** 2).mean(-1, keepdim=True)
        g = (g - mean) / (var + self.eps).sqrt()  # expect: safe div, safe sqrt
        return g.view(N, C, H, W) * self.weight + self.bias


def weight_standardize(w, eps=1e-5):
    mean = w.mean(dim=(1, 2, 3), keepdim=True)
    var = w.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
    return (w - mean) / torch.sqrt(var + eps)  # expect: safe div, safe sqrt
