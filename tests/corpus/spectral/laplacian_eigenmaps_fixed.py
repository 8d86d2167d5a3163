"""Laplacian eigenmaps on learned features, with a tie breaker on the Laplacian (the fixed twin,
as far as a tie breaker fixes anything: see the comment at the decomposition).

The embedding is the Laplacian's eigenvectors of the second and third smallest eigenvalues. When
the encoder maps the batch to one point (constant inputs, a collapsed encoder), every affinity
is 1 and the Laplacian is n * I - 1 1^T: the eigenvalue n repeats, and the backward pass through
``torch.linalg.eigh`` is NaN.
"""

import torch
from torch import nn

torch.manual_seed(1)
encoder = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.05)
points = torch.randn(10, 3)
targets = torch.randn(10, 2)

for step in range(20):
    optimizer.zero_grad()
    h = encoder(points)
    affinity = torch.exp(-((h[:, None] - h[None, :]) ** 2).sum(-1))
    laplacian = torch.diag(affinity.sum(1)) - affinity
    # a tie breaker: distinct diagonal entries keep the eigenvalues apart
    laplacian = laplacian + 1e-5 * torch.diag(torch.arange(10.0))
    # ... as far as float32 allows: next to eigenvalues near 10, 1e-5 is a few ulps, and moving the
    # encoder can still bring two of them together (the engine finds such a state), so this stays a risk.
    _, vectors = torch.linalg.eigh(laplacian)  # expect: possible spectral
    embedding = vectors[:, 1:3]
    loss = ((embedding @ embedding.T - targets @ targets.T / 10) ** 2).sum()
    loss.backward()
    optimizer.step()
print(loss.item())
