"""Entropy of normalised weights, run as a script: log(p) is -inf for a zero weight."""

import torch

torch.manual_seed(0)
weights = torch.rand(6)
p = weights / weights.sum()
entropy = -(p * torch.log(p)).sum()
print(f"entropy {float(entropy):.4f}")
