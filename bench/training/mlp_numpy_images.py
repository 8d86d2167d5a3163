"""A digit-style classifier on images made with numpy, nn.Sequential, the log of a softmax
taken by hand, prints every few hundred steps."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

rng = np.random.RandomState(0)
images = rng.rand(40, 64).astype(np.float32) * 0.1
labels = np.arange(40) % 4
for i, c in enumerate(labels):
    images[i, 16 * c:16 * c + 16] += 1.0
x = torch.from_numpy(images)
y = torch.from_numpy(labels).long()

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=1.001)

for step in range(1_000_000):
    log_probs = torch.log(F.softmax(net(x), dim=1))  # expect: confirmed log
    loss = F.nll_loss(log_probs, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
    if step % 500 == 0:
        print(f"step {step} loss {loss.item():.4f}")
