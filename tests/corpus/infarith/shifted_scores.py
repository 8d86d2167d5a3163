"""Attention written by hand: scores past each sequence's length are masked to -inf, then
shifted by the row maximum before exp for stability. A batch may hold an empty sequence."""

import torch

torch.manual_seed(0)
q = torch.randn(4, 6, 8)
k = torch.randn(4, 6, 8)
v = torch.randn(4, 6, 8)
lengths = torch.tensor([6, 3, 0, 5])

keep = torch.arange(6)[None, None, :] < lengths[:, None, None]
scores = (q @ k.transpose(1, 2) / 8**0.5).masked_fill(~keep, float("-inf"))
shifted = scores - scores.amax(-1, keepdim=True)  # expect: confirmed inf_arith
weights = shifted.exp() / shifted.exp().sum(-1, keepdim=True)  # expect: unproven div
out = weights @ v  # expect: unproven inf_arith
print("finite:", bool(torch.isfinite(out).all()))
