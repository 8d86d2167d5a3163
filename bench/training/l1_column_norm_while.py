"""A layer whose outputs are divided by the sum of the absolute weights of each column (an L1
normalisation), with no epsilon: a column of weights at 0 gives 0 / 0."""
import sys

import torch

torch.manual_seed(0)
x = torch.randn(64, 5)
t = torch.randn(64, 2)
w = torch.randn(5, 2, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)

step = 0
while True:
    s = torch.sum(torch.abs(w), dim=0)
    y = (x @ w) / s  # expect: confirmed div
    loss = ((y - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if not torch.isfinite(loss) or step >= 2000:
        if not torch.isfinite(loss):
            print(f"non-finite loss {loss.item()} at step {step}")
        sys.exit(0)
