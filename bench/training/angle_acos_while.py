"""Angles between embeddings through acos of a hand-made cosine: once training aligns two
embeddings, rounding puts the cosine a hair above 1."""
import sys

import torch

torch.manual_seed(0)
a = torch.randn(16, 8)
b = a + 0.5 * torch.randn(16, 8)

proj = torch.nn.Linear(8, 4)
optimizer = torch.optim.SGD(proj.parameters(), lr=0.05)

step = 0
while True:
    u, v = proj(a), proj(b)
    cos = (u * v).sum(1) / (u.norm(dim=1) * v.norm(dim=1))  # expect: possible div
    angle = torch.acos(cos)  # expect: confirmed acos
    loss = angle.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        sys.exit(0)
