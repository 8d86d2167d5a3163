"""Per-feature variance of float16 activations, computed in float32, for a decorrelation (VICReg-style) penalty."""

import torch

torch.manual_seed(0)
embeddings = (torch.randn(64, 32) * 20.0).half()
var = embeddings.float().var(dim=0, unbiased=False)  # expect: safe overflow
penalty = torch.relu(1.0 - var.float()).mean()
print("penalty", float(penalty))
