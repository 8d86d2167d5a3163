"""Hand-written normalisation layers."""
import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)  # expect: possible var
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2  # expect: safe div


class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps = eps
        self.momentum = momentum
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if self.training:
            mean = x.mean(0)
            var = x.var(0, unbiased=False)
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / torch.sqrt(var + self.eps)  # expect: unproven div, unproven sqrt


def standardize(x, eps=1e-5):
    return (x - x.mean()) / (x.std() + eps)  # expect: possible var, safe div


def instance_norm(x):
    mu = x.mean(dim=(2, 3), keepdim=True)
    sigma = x.std(dim=(2, 3), keepdim=True)  # expect: possible var
    return (x - mu) / sigma  # expect: possible div
