"""CLIP-style two-tower training with a learned logit scale and a hand-written softmax.

CLIP learns logit_scale = log(1 / temperature) and clamps exp(logit_scale) at
100 because it grows throughout training. This script forgot the clamp and
computes the softmax as exp / sum: once the scale passes ~88.7, the exp of an
aligned pair's logit overflows. The script stops and reports that step.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
gen = torch.Generator().manual_seed(2)
N, D, E, BATCH = 1024, 24, 16, 32
images = torch.randn(N, D, generator=gen)
captions = images @ torch.randn(D, D, generator=gen) / math.sqrt(D) + 0.05 * torch.randn(N, D, generator=gen)

image_tower = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, E))
text_tower = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, E))
logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
towers = list(image_tower.parameters()) + list(text_tower.parameters())
# The scale gets its own, larger learning rate "so the temperature adapts quickly".
opt = torch.optim.Adam([{"params": towers, "lr": 5e-3}, {"params": [logit_scale], "lr": 0.1}])

for step in range(6000):
    idx = torch.randint(0, N, (BATCH,), generator=gen)
    a = F.normalize(image_tower(images[idx]), dim=1)
    b = F.normalize(text_tower(captions[idx]), dim=1)
    # Both rows are unit vectors, so each cosine lies in [-1, 1]; the scale is the risk.
    # Moving logit_scale from 2.7 to 88.7 would be needed before this exp overflows.
    scale = logit_scale.exp()  # expect: possible exp
    e = torch.exp(scale * (a @ b.T))  # expect: confirmed exp
    # Rows of e are >= 0 but can all underflow to 0 with a large scale and opposed pairs.
    p = e.diagonal() / e.sum(1)  # expect: confirmed div
    loss = -torch.log(p).mean()  # expect: confirmed log
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step} (scale {scale.item():.1f})")
        break
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"step {step:4d}  loss {loss.item():.4f}  scale {scale.item():.2f}")
