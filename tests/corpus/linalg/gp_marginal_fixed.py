"""Gaussian-process regression with observation noise on the diagonal (the fixed twin).

The kernel matrix of an RBF covariance is only positive semi-definite: two training inputs
that coincide (a duplicated row in the data) make two rows equal, the matrix singular, and its
log-determinant -inf (or NaN, when round-off makes the determinant negative).
"""

import torch

torch.manual_seed(1)
x = torch.randn(6, 2)
y = torch.randn(6)
scale = torch.ones((), requires_grad=True)

d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
K = torch.exp(-0.5 * d2) + 1e-4 * torch.eye(len(x))  # observation noise
alpha = torch.linalg.lstsq(K, y[:, None]).solution[:, 0]
nll = 0.5 * scale * (y @ alpha) + 0.5 * torch.logdet(K)  # expect: unproven logdet
nll.backward()
