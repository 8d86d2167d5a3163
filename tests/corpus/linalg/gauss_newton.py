"""A Gauss-Newton step for fitting a small tanh network's output layer.

The normal matrix J^T J is positive definite only while the residuals' Jacobian has full
column rank; saturated or repeated hidden units make it singular and the Cholesky solve fails.
"""

import torch

torch.manual_seed(9)
inputs = torch.randn(7, 3)
targets = torch.randn(7)
hidden_w = torch.randn(3, 4)

J = torch.tanh(inputs @ hidden_w)
normal = J.T @ J
R = normal.cholesky()  # expect: confirmed cholesky
step = torch.cholesky_solve((J.T @ targets)[:, None], R)
print(step.shape)
