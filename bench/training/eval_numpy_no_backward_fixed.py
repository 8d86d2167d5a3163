"""Fixed twin of eval_numpy_no_backward.py: the probabilities are clamped before each log."""
import sys

import numpy as np
import torch

rng = np.random.default_rng(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

step = 0
while True:
    batch = torch.from_numpy(rng.normal(size=(256, 64)).astype(np.float32))
    probs = torch.softmax(model(batch), dim=1)
    nll = -torch.log(probs.clamp_min(1e-12)).mean()  # expect: safe log
    step += 1
    if not torch.isfinite(nll):
        print(f"non-finite loss {nll.item()} at step {step}")
        print("smallest probability", torch.log(probs.min().clamp_min(1e-12)).item())  # expect: safe log
        sys.exit(0)
