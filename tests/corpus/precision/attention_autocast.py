"""Dot-product attention scores under CPU float16 autocast, without the 1/sqrt(d) scale."""

import torch
import torch.nn as nn

torch.manual_seed(0)
d = 128
x = torch.randn(4, 16, d)
to_q, to_k = nn.Linear(d, d), nn.Linear(d, d)

with torch.autocast("cpu", dtype=torch.float16):
    q, k = to_q(x), to_k(x)
    scores = q @ k.transpose(-2, -1)  # expect: confirmed overflow
    attn = scores.softmax(-1)
print("attention", attn.shape)
