"""Cholesky whitening with a ridge on the covariance (the fixed twin).

The embeddings are unit-normalised; a batch with fewer distinct rows than dimensions gives a
singular covariance, and its Cholesky factorization raises.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(8)
proj = nn.Linear(6, 4)
views = torch.randn(10, 6)

z = F.normalize(proj(views), dim=-1)
z = z - z.mean(0)
cov = z.T @ z  # the scatter matrix: whitening up to a scale
L = torch.cholesky(cov + 1e-3 * torch.eye(4))  # expect: unproven cholesky
white = torch.linalg.solve_triangular(L, z.T, upper=False).T
white.pow(2).mean().backward()
