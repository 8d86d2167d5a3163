"""Shares of a ReLU output normalised by their row sum: a row whose units are all dead
divides 0 by 0."""
import torch

torch.manual_seed(0)
x = torch.randn(32, 6)
target = torch.softmax(torch.randn(32, 8), dim=1)

layer = torch.nn.Linear(6, 8)
torch.nn.init.constant_(layer.bias, 0.5)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)

for step in range(2_000_000):
    h = torch.relu(layer(x))
    share = h / h.sum(dim=1, keepdim=True)  # expect: confirmed div
    loss = ((share - target) ** 2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
