"""Orthogonal Procrustes alignment of two learned embeddings of the same items.

The best rotation R = U V^T comes from the SVD of A^T B. When one embedding collapses (all-zero
or constant inputs), A^T B has repeated (zero) singular values and the backward pass through
``torch.svd`` is NaN.
"""

import torch
from torch import nn

torch.manual_seed(3)
embed_a = nn.Linear(6, 3, bias=False)
embed_b = nn.Linear(6, 3, bias=False)
items = torch.randn(9, 6)

A, B = embed_a(items), embed_b(items)
U, S, V = torch.svd(A.T @ B)  # expect: confirmed spectral
R = U @ V.T
loss = ((A @ R - B) ** 2).sum()
loss.backward()
print(loss.item())
