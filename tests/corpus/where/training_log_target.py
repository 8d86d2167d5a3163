"""A training loop fitting log-predictions, taken only where the prediction is positive."""

import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.rand(64, 3) + 0.2
y = torch.log(x.sum(-1))  # expect: safe log
model = nn.Linear(3, 1)
with torch.no_grad():
    model.weight.fill_(1.0)
    model.bias.zero_()
opt = torch.optim.SGD(model.parameters(), lr=0.01)

for step in range(200):
    pred = model(x).squeeze(-1)
    log_pred = torch.where(pred > 0, torch.log(pred), pred)  # expect: confirmed log
    loss = ((log_pred - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if not torch.isfinite(model.weight).all():
        print(f"non-finite weights at step {step}")
        break
