"""Determinantal point process: log-likelihood of a selected subset of items.

The kernel is built from unit-norm diversity features; two selected items whose features
point the same way (near-duplicates in a recommendation slate) make the subset's kernel
singular and its log-determinant -inf.
"""

import torch
import torch.nn.functional as F

torch.manual_seed(3)
features = torch.randn(8, 5)
quality = torch.zeros(8, requires_grad=True)
chosen = torch.tensor([0, 2, 5])

V = F.normalize(features, dim=-1) * torch.sigmoid(quality)[:, None]
L = V @ V.T
L_Y = L[chosen][:, chosen]
log_lik = L_Y.logdet() - torch.logdet(L + torch.eye(8))  # expect: confirmed logdet, unproven logdet
(-log_lik).backward()
