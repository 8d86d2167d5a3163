"""Inverse scales with the infinities of a zero scale replaced by 0 (nan_to_num)."""

import torch
import torch.nn as nn

torch.manual_seed(0)
raw = torch.rand(10) + 0.5
gain = nn.Parameter(torch.ones(10))

scale = raw * gain
inverse = torch.nan_to_num(1.0 / scale.clamp_min(1e-8), posinf=0.0, neginf=0.0)  # expect: safe div
loss = inverse.sum()
loss.backward()
print("gain grad finite:", bool(torch.isfinite(gain.grad).all()))
