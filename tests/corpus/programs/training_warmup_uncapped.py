"""Heteroscedastic regression trained with a learning-rate warm-up that was never capped.

The head predicts a mean and a log-variance (a Gaussian likelihood). The schedule
ramps the learning rate linearly "for the first steps" but the cap was forgotten:
for tens of thousands of steps training is fine, then the rate passes what plain
SGD can take on this problem, the updates overshoot and grow, and the likelihood
overflows. The script stops and reports the step where the loss is non-finite,
as a long run that turns NaN far into training does.
"""

import torch
import torch.nn as nn

torch.manual_seed(0)
gen = torch.Generator().manual_seed(3)
N, D, BATCH = 2048, 8, 64
X = torch.randn(N, D, generator=gen)
y = X @ torch.randn(D, generator=gen) + 0.3 * torch.randn(N, generator=gen)

head = nn.Linear(D, 2)  # mean and log-variance
opt = torch.optim.SGD(head.parameters(), lr=0.0)
WARMUP_PER_STEP = 4e-6  # the warm-up slope; nothing stops it

for step in range(1_000_000):
    for group in opt.param_groups:
        group["lr"] = WARMUP_PER_STEP * step
    idx = torch.randint(0, N, (BATCH,), generator=gen)
    out = head(X[idx])
    mu, log_var = out[:, 0], out[:, 1]
    var = torch.exp(log_var)  # expect: confirmed exp
    loss = (0.5 * (y[idx] - mu) ** 2 / var + 0.5 * log_var).mean()  # expect: confirmed div
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 5000 == 0:
        print(f"step {step:6d}  lr {WARMUP_PER_STEP * step:.4f}  loss {loss.item():.4f}")
