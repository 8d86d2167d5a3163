"""Log-transformed regression target, computed only where the prediction is positive."""

import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.rand(32, 4) + 0.1
target = torch.rand(32)
layer = nn.Linear(4, 1)
with torch.no_grad():
    layer.weight.fill_(0.5)
    layer.bias.fill_(0.1)

pred = layer(x).squeeze(-1)
log_pred = torch.where(pred > 0, torch.log(pred), torch.zeros_like(pred))  # expect: confirmed log
loss = ((log_pred - target) ** 2).mean()
loss.backward()
print("weight grad finite:", bool(torch.isfinite(layer.weight.grad).all()))
