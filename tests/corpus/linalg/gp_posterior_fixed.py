"""Gaussian-process posterior mean with a jittered kernel (the fixed twin).

The RBF kernel of two coinciding inputs (a repeated measurement) has two equal rows: it is
singular, and ``torch.linalg.cholesky`` refuses it with a LinAlgError.
"""

import torch


def posterior_mean(x_train, y_train, x_test):
    K = torch.exp(-0.5 * ((x_train[:, None] - x_train[None, :]) ** 2))
    L = torch.linalg.cholesky(K + 1e-4 * torch.eye(len(x_train)))  # expect: unproven cholesky
    alpha = torch.cholesky_solve(y_train[:, None], L)
    k_star = torch.exp(-0.5 * ((x_test[:, None] - x_train[None, :]) ** 2))
    return (k_star @ alpha)[:, 0]


torch.manual_seed(0)
x_train = torch.linspace(-2, 2, 5) + 0.1 * torch.randn(5)
y_train = torch.sin(x_train)
x_test = torch.randn(3)
print(posterior_mean(x_train, y_train, x_test).shape)
