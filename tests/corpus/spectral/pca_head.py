"""A PCA head: project learned embeddings on their top two principal directions.

The principal directions are the right singular vectors of the centred embeddings. A batch the
encoder maps to one point (identical or all-zero inputs) has only zero singular values: they
repeat, and the backward pass through ``torch.linalg.svd`` is NaN.
"""

import torch
from torch import nn

torch.manual_seed(2)
encoder = nn.Linear(5, 4)
inputs = torch.randn(12, 5)
labels = torch.randn(12, 2)

z = encoder(inputs)
centred = z - z.mean(0)
U, S, Vh = torch.linalg.svd(centred, full_matrices=False)  # expect: confirmed spectral
projected = centred @ Vh[:2].T
loss = ((projected - labels) ** 2).mean()
loss.backward()
print(loss.item())
