"""Outputs normalised by an L2 regulariser of the layer's own weights, with no epsilon: the
divisor is 0 when every weight is 0, as it is in a zero-initialised or fully pruned layer."""
import torch

torch.manual_seed(0)
x = torch.randn(64, 4)
t = torch.randn(64, 3)
w = torch.nn.Parameter(torch.randn(4, 3) * 0.1)
opt = torch.optim.SGD([w], lr=0.05)

for epoch in range(200):
    reg = 0.01 * (w ** 2).sum()
    y = (x @ w) / reg  # expect: confirmed div
    loss = ((y - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
