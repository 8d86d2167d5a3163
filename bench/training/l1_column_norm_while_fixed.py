"""Fixed twin of l1_column_norm_while.py: an epsilon keeps the L1 normaliser away from 0."""
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
    y = (x @ w) / (s + 1e-6)  # expect: safe div
    loss = ((y - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if not torch.isfinite(loss) or step >= 2000:
        if not torch.isfinite(loss):
            print(f"non-finite loss {loss.item()} at step {step}")
        sys.exit(0)
