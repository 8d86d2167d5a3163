"""A multivariate Gaussian head with a Cholesky-parametrised covariance (the fixed twin).

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

cov = torch.tril(raw) @ torch.tril(raw).T + 1e-2 * torch.eye(dim)  # Cholesky parametrisation
diff = target - mean
maha = (diff @ torch.linalg.pinv(cov) * diff).sum(-1)
nll = 0.5 * (maha + torch.logdet(cov)).mean()  # expect: unproven logdet
nll.backward()
