"""Self-attention over padded sequences with a hand-rolled masked softmax.

Written out as exp / sum so padding can be zeroed by multiplying with the mask.
Without subtracting the row maximum exp overflows on large scores, and a
sequence whose tokens are all padding has a row of zeros: 0 / 0.
"""

import torch
import torch.nn as nn


def masked_softmax(scores, mask):
    e = torch.exp(scores) * mask  # expect: confirmed exp
    return e / e.sum(-1, keepdim=True)  # expect: confirmed div


class MaskedSelfAttention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.scale = 0.25  # 1 / sqrt(dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) * self.scale
        attn = masked_softmax(scores, mask[:, None, :].float())
        return attn @ v


if __name__ == "__main__":
    torch.manual_seed(0)
    layer = MaskedSelfAttention()
    x = torch.randn(3, 7, 16)
    lengths = torch.tensor([7, 4, 2])
    mask = torch.arange(7)[None, :] < lengths[:, None]
    print(layer(x, mask).shape)
