"""An entropy bonus for a policy over a masked action set: illegal actions get -inf logits."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
obs = torch.randn(8, 6)
legal = torch.rand(8, 5) > 0.3
legal[:, 0] = True  # every state has a legal action
policy = nn.Linear(6, 5)

logits = policy(obs).masked_fill(~legal, float("-inf"))
probs = F.softmax(logits, dim=-1)  # expect: unproven softmax
log_probs = F.log_softmax(logits, dim=-1)  # expect: unproven softmax
entropy = -(probs * log_probs).sum(-1).mean()  # expect: confirmed inf_arith
(-0.01 * entropy).backward()
print("entropy", float(entropy))
