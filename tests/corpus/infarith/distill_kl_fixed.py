"""Distillation over a shared vocabulary: tokens outside each model's vocabulary get a large finite
negative logit in both, and the KL sums teacher mass times the log-ratio."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
hidden = torch.randn(16, 12)
in_vocab = torch.rand(32) > 0.25
teacher = nn.Linear(12, 32)
student = nn.Linear(12, 32)

with torch.no_grad():
    t_logp = F.log_softmax(teacher(hidden).masked_fill(~in_vocab, -1e4), dim=-1)
s_logp = F.log_softmax(student(hidden).masked_fill(~in_vocab, -1e4), dim=-1)
kl = (t_logp.exp() * (t_logp - s_logp)).sum(-1).mean()  # expect: safe inf_arith
kl.backward()
print("kl", float(kl))
