"""Pointer-network head that keeps one candidate per row out of the -inf fill.

A sample with no valid candidate falls back to all of them (a uniform pointer,
which the loss then ignores), so no row of the log-softmax is entirely -inf.
"""

import torch
import torch.nn as nn


class PointerHead(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.query = nn.Linear(dim, dim)

    def forward(self, queries, candidates, valid):
        scores = self.query(queries) @ candidates.transpose(-1, -2)
        valid = valid | ~valid.any(-1, keepdim=True)
        scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
        return torch.log_softmax(scores, dim=-1)  # expect: safe softmax


if __name__ == "__main__":
    torch.manual_seed(0)
    head = PointerHead()
    valid = torch.arange(5)[None, :] < torch.tensor([5, 0, 3])[:, None]
    print(head(torch.randn(3, 2, 16), torch.randn(3, 5, 16), valid).isnan().any())
