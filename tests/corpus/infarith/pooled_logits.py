"""Pooling item embeddings by masked relevance scores, where the scores were meant to go through
a softmax first: the -inf of masked items meets the zeros of ReLU features."""

import torch
import torch.nn as nn

torch.manual_seed(0)
query = torch.randn(5, 16)
items = torch.randn(7, 16)
available = torch.rand(5, 7) > 0.4
scorer = nn.Bilinear(16, 16, 1)
table = nn.Linear(16, 4)

scores = scorer(query[:, None, :].expand(5, 7, 16), items[None].expand(5, 7, 16)).squeeze(-1)
scores = scores.masked_fill(~available, float("-inf"))
features = torch.relu(table(items))
pooled = torch.einsum("qn,nd->qd", scores, features)  # expect: confirmed inf_arith
pooled.sum().backward()
print("pooled", pooled.shape)
