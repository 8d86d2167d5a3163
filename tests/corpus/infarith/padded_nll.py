"""A sequence loss over padded batches: padding positions are pushed to -inf so they can never
be picked, and the per-token weights zero them out of the sum."""

import torch
import torch.nn as nn

torch.manual_seed(0)
tokens = torch.randn(4, 10, 8)
lengths = torch.tensor([10, 7, 4, 9])
targets = torch.randint(0, 6, (4, 10))
head = nn.Linear(8, 6)

pad = torch.arange(10)[None, :] >= lengths[:, None]
log_probs = torch.log_softmax(head(tokens), dim=-1)
picked = log_probs.gather(-1, targets[..., None]).squeeze(-1).masked_fill(pad, float("-inf"))
weights = (~pad).float() / (~pad).sum()  # expect: possible div
loss = -(picked * weights).sum()  # expect: confirmed inf_arith
loss.backward()
print("loss", float(loss))
