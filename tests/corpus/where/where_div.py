"""A learned ratio, reported as 0 where the denominator is 0."""

import torch
import torch.nn as nn

torch.manual_seed(0)
features = torch.randn(16, 3)
scale = torch.rand(16) + 0.5
head = nn.Linear(3, 1)
gain = nn.Parameter(torch.ones(16))

num = head(features).squeeze(-1)
den = scale * gain
ratio = torch.where(den != 0, num / den, torch.zeros_like(num))  # expect: confirmed div
loss = (ratio**2).mean()
loss.backward()
print("gain grad finite:", bool(torch.isfinite(gain.grad).all()))
