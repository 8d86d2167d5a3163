"""Fixed twin of l2_normalised_output_for.py: the regulariser is kept away from 0."""
import torch

torch.manual_seed(0)
x = torch.randn(64, 4)
t = torch.randn(64, 3)
w = torch.nn.Parameter(torch.randn(4, 3) * 0.1)
opt = torch.optim.SGD([w], lr=0.05)

for epoch in range(200):
    reg = 0.01 * (w ** 2).sum() + 1e-3
    y = (x @ w) / reg  # expect: safe div
    loss = ((y - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
