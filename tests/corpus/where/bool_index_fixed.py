"""Negative log-score of the rows whose score is positive, selected by boolean indexing."""

import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.randn(32, 4)
w = nn.Parameter(torch.randn(4, 1))

score = (x @ w).squeeze(-1).abs()
log_score = torch.log(torch.where(score > 0, score, 1))  # expect: safe log
kept = log_score[score > 0]
loss = -kept.sum()
loss.backward()
print("w grad finite:", bool(torch.isfinite(w.grad).all()))
