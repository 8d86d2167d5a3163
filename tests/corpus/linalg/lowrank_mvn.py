"""A decoder that samples from a multivariate normal with a learned low-rank covariance.

The covariance factor has fewer columns than the dimension, so ``A @ A.T`` is singular, and
the learned diagonal added to it is kept positive by nothing: once it reaches 0 the Cholesky
factorization fails.
"""

import torch
import torch.nn as nn


class LowRankHead(nn.Module):
    def __init__(self, dim, rank):
        super().__init__()
        self.factor = nn.Parameter(torch.randn(dim, rank) * 0.5)
        self.diag = nn.Parameter(torch.full((dim,), 0.1))

    def forward(self, mean):
        cov = self.factor @ self.factor.T + torch.diag(self.diag)
        scale_tril = torch.linalg.cholesky(cov)  # expect: confirmed cholesky
        eps = torch.randn_like(mean)
        return mean + eps @ scale_tril.T


torch.manual_seed(7)
head = LowRankHead(4, 2)
sample = head(torch.randn(5, 4))
sample.pow(2).mean().backward()
