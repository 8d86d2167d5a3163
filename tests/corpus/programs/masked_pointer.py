"""Pointer-network head: each query picks one of its valid candidates.

Candidates are masked with -inf before the log-softmax. A sample whose candidate
list is empty (every candidate invalid) gives a row that is entirely -inf, and
its log-softmax is NaN.
"""

import torch
import torch.nn as nn


class PointerHead(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.query = nn.Linear(dim, dim)

    def forward(self, queries, candidates, valid):
        scores = self.query(queries) @ candidates.transpose(-1, -2)  # (batch, queries, candidates)
        scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
        # possible rather than confirmed: the hand oracle of test_corpus_markers only fires
        # on finite operands, and these scores hold -inf by design.
        return torch.log_softmax(scores, dim=-1)  # expect: possible softmax


if __name__ == "__main__":
    torch.manual_seed(0)
    head = PointerHead()
    valid = torch.arange(5)[None, :] < torch.tensor([5, 2, 3])[:, None]
    print(head(torch.randn(3, 2, 16), torch.randn(3, 5, 16), valid).shape)
