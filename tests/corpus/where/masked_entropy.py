"""Entropy of a policy over the allowed actions: log-probabilities of forbidden actions are masked to 0."""

import torch
import torch.nn as nn

torch.manual_seed(0)
obs = torch.randn(4, 5)
allowed = torch.rand(4, 6) > 0.3
policy = nn.Linear(5, 6)

preference = (torch.tanh(policy(obs)) + 1.5) * allowed
probs = preference / preference.sum(-1, keepdim=True).clamp_min(1e-8)
log_probs = torch.log(probs).masked_fill(~allowed, 0.0)  # expect: confirmed log
entropy = -(probs * log_probs).sum(-1).mean()
entropy.backward()
print("policy grad finite:", bool(torch.isfinite(policy.weight.grad).all()))
