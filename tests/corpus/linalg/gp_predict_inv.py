"""Gaussian-process predictive mean through the explicit inverse of the RBF kernel.

Two training inputs at the same place (a repeated measurement) give the kernel two equal rows:
it is singular, and ``torch.linalg.inv`` refuses it with a LinAlgError.
"""

import torch


def rbf(a, b, lengthscale=0.5):
    return torch.exp(-0.5 * ((a[:, None] - b[None, :]) / lengthscale) ** 2)


def predictive_mean(x_train, y_train, x_test):
    K = rbf(x_train, x_train)
    K_inv = torch.linalg.inv(K)  # expect: confirmed inverse
    return rbf(x_test, x_train) @ (K_inv @ y_train)


torch.manual_seed(1)
x_train = 3 * torch.randn(6)
y_train = torch.cos(x_train)
x_test = torch.linspace(-2, 2, 4)
print(predictive_mean(x_train, y_train, x_test).shape)
