"""Pooling item embeddings by masked relevance scores, normalised by a softmax first: masked
items get weight 0 (every query has an available item)."""

import torch
import torch.nn as nn

torch.manual_seed(0)
query = torch.randn(5, 16)
items = torch.randn(7, 16)
available = torch.rand(5, 7) > 0.4
available[:, 0] = True
scorer = nn.Bilinear(16, 16, 1)
table = nn.Linear(16, 4)

scores = scorer(query[:, None, :].expand(5, 7, 16), items[None].expand(5, 7, 16)).squeeze(-1)
scores = scores.masked_fill(~available, float("-inf"))
features = torch.relu(table(items))
pooled = torch.einsum("qn,nd->qd", torch.softmax(scores, dim=-1), features)  # expect: safe inf_arith, unproven softmax
pooled.sum().backward()
print("pooled", pooled.shape)
