"""Attention pooling over padded sets, with an attention-entropy regulariser.

A set with no valid element fills its score row with -inf and torch.softmax
returns NaN for it. That NaN is born inside softmax (GRIST115, a fully masked
row); the guarded division and the guarded log below only receive it. Blaming
them would be the classic downstream false positive.
"""

import torch
import torch.nn as nn


class AttentionPool(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x, mask):
        scores = self.score(x).squeeze(-1).masked_fill(~mask, float("-inf"))
        # possible rather than confirmed: the hand oracle of test_corpus_markers only fires
        # on finite operands, and these scores hold -inf by design.
        attn = torch.softmax(scores, dim=-1)  # expect: possible softmax
        pooled = (attn.unsqueeze(-1) * x).sum(1)
        norm = pooled.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        # Entropy regulariser on the weights: a softmax output plus 1e-9 is at least 1e-9.
        entropy = -(attn * torch.log(attn + 1e-9)).sum(-1)  # expect: safe log
        return pooled / norm, entropy  # expect: safe div


if __name__ == "__main__":
    torch.manual_seed(0)
    pool = AttentionPool()
    x = torch.randn(4, 5, 16)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 3, 1, 2])[:, None]
    out, entropy = pool(x, mask)
    print(out.shape, entropy)
