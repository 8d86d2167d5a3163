"""Tabular regression trained by a script that standardises every mini-batch by its own std.

Column 0 is a binary flag that is set for ~18% of the rows (think "has_garage").
Most batches contain both values; once in a few hundred batches all 32 rows
share the same flag, that column's std is 0, and (x - mean) / std is 0 / 0.
The script stops and reports the step where the loss turns NaN.
"""

import torch
import torch.nn as nn

torch.manual_seed(0)
gen = torch.Generator().manual_seed(1)
N, D, BATCH = 4096, 12, 32
X = torch.randn(N, D, generator=gen)
X[:, 0] = (torch.rand(N, generator=gen) < 0.18).float()
y = X @ torch.randn(D, generator=gen) + 0.1 * torch.randn(N, generator=gen)

model = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(5000):
    idx = torch.randint(0, N, (BATCH,), generator=gen)
    xb, yb = X[idx], y[idx]
    # A batch of one row would make the unbiased std NaN; a constant column makes it 0.
    xb = (xb - xb.mean(0)) / xb.std(0)  # expect: confirmed div, confirmed var
    loss = ((model(xb).squeeze(1) - yb) ** 2).mean()
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"step {step:4d}  loss {loss.item():.4f}")
