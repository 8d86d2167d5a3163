"""Poisson regression with a learning-rate warm-up capped too high: past the rate's
curvature the weights oscillate, and exp(x @ w) overflows once they run away."""
import sys

import numpy as np
import torch

rng = np.random.RandomState(0)
X = torch.as_tensor(rng.rand(32, 3).astype(np.float32))
counts = torch.as_tensor(rng.poisson(3.0, size=(32, 1)).astype(np.float32))

w = torch.zeros(3, 1, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=1e-3)

step = 0
while True:
    rate = torch.exp(X @ w)  # expect: confirmed exp
    loss = (rate - counts * (X @ w)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] = min(group["lr"] * 1.0005, 5.0)
    step += 1
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        sys.exit(0)
