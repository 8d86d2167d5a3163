"""A small MLP on numpy data (torch.from_numpy), nn.Sequential, the log of a softmax by hand."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.RandomState(0)
centers = np.array([[2.0, 2.0], [-2.0, 2.0], [0.0, -2.5]])
X = np.concatenate([c + 0.3 * rng.randn(20, 2) for c in centers]).astype(np.float32)
Y = np.repeat(np.arange(3), 20)
x = torch.from_numpy(X)
y = torch.from_numpy(Y)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

for step in range(1_000_000):
    probs = F.softmax(model(x), dim=1)
    loss = -torch.log(probs).gather(1, y.unsqueeze(1)).mean()  # expect: confirmed log
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] = 0.02 * (1 + step / 2000)  # linear warm-up, cap forgotten
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
