"""Inputs rescaled by a learned per-feature gain, the divisor clamped away from 0: the quiet twin of gain_eps_div_trained.py."""
import torch

torch.manual_seed(0)
x = torch.rand(200, 8)
y = x.sum(1, keepdim=True)
gain = torch.ones(8, requires_grad=True)
w = torch.zeros(8, 1, requires_grad=True)
opt = torch.optim.SGD([gain, w], lr=0.01)

for epoch in range(300):
    z = x / gain.clamp(min=1e-3)  # expect: safe div
    loss = ((z @ w - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
