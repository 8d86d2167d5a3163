"""A Kalman filter step with a softplus measurement variance (the fixed twin).

The measurement noise is a learned log-free variance: training can push it to or below zero,
the innovation covariance is then no longer positive definite, and its Cholesky factor
raises a LinAlgError.
"""

import torch
import torch.nn as nn

torch.manual_seed(6)
F_ = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
H = torch.tensor([[1.0, 0.0]])
noise = nn.Parameter(torch.tensor([0.5]))
state = torch.zeros(2)
P = torch.eye(2)
observations = torch.randn(8)

for z in observations:
    state = F_ @ state
    P = F_ @ P @ F_.T + 0.01 * torch.eye(2)
    S = H @ P @ H.T + torch.diag(torch.nn.functional.softplus(noise) + 1e-3)  # variance kept positive
    S_chol = torch.linalg.cholesky(S)  # expect: unproven cholesky
    gain = torch.cholesky_solve(H @ P, S_chol).T
    state = state + gain @ (z - H @ state)[..., None]
    state = state[:, 0] if state.dim() > 1 else state
    P = (torch.eye(2) - gain @ H) @ P
loss = state.pow(2).sum()
loss.backward()
