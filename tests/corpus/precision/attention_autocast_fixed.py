"""Dot-product attention scores under CPU float16 autocast, between unit vectors (cosine
attention with a temperature): every score is in [-1, 1] before the temperature."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
d = 128
x = torch.randn(4, 16, d)
to_q, to_k = nn.Linear(d, d), nn.Linear(d, d)

with torch.autocast("cpu", dtype=torch.float16):
    q, k = F.normalize(to_q(x), dim=-1), F.normalize(to_k(x), dim=-1)
    scores = (q @ k.transpose(-2, -1)) / 0.1  # expect: unproven overflow
    attn = scores.softmax(-1)
print("attention", attn.shape)
