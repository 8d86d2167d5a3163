"""Scoring numpy batches with a fixed model, for ever: no backward, no optimizer."""
import sys

import numpy as np
import torch

rng = np.random.default_rng(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

step = 0
while True:
    batch = torch.from_numpy(rng.normal(size=(256, 64)).astype(np.float32))
    probs = torch.softmax(model(batch), dim=1)
    nll = -torch.log(probs).mean()  # expect: confirmed log
    step += 1
    if not torch.isfinite(nll):
        print(f"non-finite loss {nll.item()} at step {step}")
        # Reached only once the loss is NaN: the inputs that broke line 14 break this one too.
        print("smallest probability", torch.log(probs.min()).item())  # expect: confirmed log
        sys.exit(0)
