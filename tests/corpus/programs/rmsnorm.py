"""Two RMSNorm layers (LLaMA / T5 style): one with eps under the root, one without."""

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # NaN only for a zero-width feature dimension.
        ms = x.pow(2).mean(-1, keepdim=True)
        return self.weight * x * torch.rsqrt(ms + 1e-6)  # expect: safe rsqrt


class RMSNormNoEps(nn.Module):
    """Ported from a paper's pseudo-code, which had no eps."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        ms = x.pow(2).mean(-1, keepdim=True)
        # An all-zero token (padding embedding) gives rsqrt(0) = inf.
        return self.weight * x * torch.rsqrt(ms)  # expect: confirmed rsqrt


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    print(RMSNorm(16)(x).norm().item(), RMSNormNoEps(16)(x).norm().item())
