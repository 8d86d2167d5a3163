"""A multivariate Gaussian head: the negative log-likelihood with a learned covariance.

The covariance is a free learned matrix, symmetrised but never constrained: its determinant
can reach 0 or go negative, and the log-determinant is then -inf or NaN.
"""

import torch
import torch.nn as nn

torch.manual_seed(2)
dim = 3
raw = nn.Parameter(torch.eye(dim) + 0.05 * torch.randn(dim, dim))
target = torch.randn(10, dim)
mean = torch.zeros(dim, requires_grad=True)

cov = 0.5 * (raw + raw.T)
diff = target - mean
maha = (diff @ torch.linalg.pinv(cov) * diff).sum(-1)
nll = 0.5 * (maha + torch.logdet(cov)).mean()  # expect: confirmed logdet
nll.backward()
