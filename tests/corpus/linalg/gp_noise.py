"""Kernel ridge / GP regression with a learned noise level added to the kernel diagonal.

The noise is a raw learned scalar: when it drops below minus the kernel's smallest
eigenvalue (training drives it down to fit the data), K + noise * I is indefinite and the
Cholesky factorization raises.
"""

import torch
import torch.nn as nn

torch.manual_seed(10)
x = torch.randn(6, 2)
y = torch.randn(6)
noise = nn.Parameter(torch.tensor(0.05))

K = torch.exp(-0.5 * torch.cdist(x, x) ** 2)
L = torch.linalg.cholesky(K + noise * torch.eye(6))  # expect: confirmed cholesky
alpha = torch.cholesky_solve(y[:, None], L)
fit = (K @ alpha)[:, 0]
((fit - y) ** 2).mean().backward()
