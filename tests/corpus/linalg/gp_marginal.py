"""Gaussian-process regression: the negative log marginal likelihood of an RBF kernel.

The kernel matrix of an RBF covariance is only positive semi-definite: two training inputs
that coincide (a duplicated row in the data) make two rows equal, the matrix singular, and its
log-determinant -inf.
"""

import math

import torch

torch.manual_seed(1)
x = torch.randn(6, 2)
y = torch.randn(6)
log_lengthscale = torch.zeros((), requires_grad=True)


def rbf(a, b, lengthscale):
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return torch.exp(-0.5 * d2 / lengthscale**2)


K = rbf(x, x, log_lengthscale.exp())
alpha = torch.linalg.solve(K, y)
nll = 0.5 * (y @ alpha) + 0.5 * torch.logdet(K) + 0.5 * len(y) * math.log(2 * math.pi)  # expect: confirmed logdet
nll.backward()
