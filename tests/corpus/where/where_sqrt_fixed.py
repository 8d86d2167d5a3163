"""Pairwise distances between embeddings: sqrt only where the squared distance is positive."""

import torch
import torch.nn as nn

torch.manual_seed(0)
points = torch.randn(6, 3)
embed = nn.Linear(3, 2)

z = embed(points)
d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
dist = torch.where(d2 > 0, torch.sqrt(torch.where(d2 > 0, d2, 1)), torch.zeros_like(d2))  # expect: safe sqrt
loss = torch.relu(1.0 - dist).mean()
loss.backward()
print("weight grad finite:", bool(torch.isfinite(embed.weight.grad).all()))
