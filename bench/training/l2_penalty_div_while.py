"""Outputs scaled by the inverse of an L2 penalty on the layer's weights, with no epsilon: the
penalty is 0 when the weights are, as in a zero-initialised or fully pruned layer."""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(4, 3)
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
x = torch.randn(16, 4)
t = torch.randn(16, 3)

step = 0
while True:
    w = layer.weight
    penalty = 0.01 * (w**2).sum()
    y = layer(x) / penalty  # expect: confirmed div
    loss = ((y - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if not torch.isfinite(loss) or step >= 2000:
        if not torch.isfinite(loss):
            print(f"non-finite loss {loss.item()} at step {step}")
        sys.exit(0)
