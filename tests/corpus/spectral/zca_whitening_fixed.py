"""Decorrelated batch normalisation with a whitening matrix the backward pass treats as a constant
(the fixed twin; a tie breaker on the covariance only moves the tie, and the engine finds it).

The whitening matrix is built from the eigenvectors of the batch covariance. When the batch's
features do not vary (a constant or padding batch, a dead layer), the covariance is a multiple
of the identity: its eigenvalues repeat, the forward pass is finite, and the backward pass through
``torch.linalg.eigh`` divides by their zero gaps (NaN in every weight below).
"""

import torch
from torch import nn


class ZCANorm(nn.Module):
    def forward(self, x):
        centered = x - x.mean(0)
        cov = torch.cov(centered.T) + 1e-3 * torch.eye(x.shape[1])
        # the whitening matrix is a constant for the backward pass: no gradient through eigh
        L, V = torch.linalg.eigh(cov.detach())  # expect: unproven spectral
        return centered @ V @ torch.diag(L.clamp_min(1e-5).rsqrt()) @ V.T


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 3), ZCANorm(), nn.Linear(3, 1))
x = torch.randn(16, 4)
y = torch.randn(16, 1)
loss = ((model(x) - y) ** 2).mean()
loss.backward()
print(loss.item())
