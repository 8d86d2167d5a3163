"""Per-feature variance of float16 activations, for a decorrelation (VICReg-style) penalty."""

import torch

torch.manual_seed(0)
embeddings = (torch.randn(64, 32) * 20.0).half()
var = embeddings.var(dim=0, unbiased=False)  # expect: confirmed overflow
penalty = torch.relu(1.0 - var.float()).mean()
print("penalty", float(penalty))
