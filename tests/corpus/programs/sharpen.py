"""Pseudo-label sharpening (MixMatch): p ** (1 / T), renormalised over the classes.

The temperature is a tensor annealed from data. At T == 0 the reciprocal is inf;
a negative T raises an underflowed probability (exactly 0) to a negative power;
and a small T underflows every sharpened term of a row to 0, which the
renormalisation turns into 0 / 0.
"""

import torch


def sharpen(logits, temperature):
    p = torch.softmax(logits, dim=-1)
    inv_t = 1.0 / temperature  # expect: confirmed div
    # possible rather than confirmed: only a negative temperature, which this script's
    # callers never pass, raises an underflowed probability to a negative power.
    q = p ** inv_t  # expect: possible pow
    return q / q.sum(-1, keepdim=True)  # expect: confirmed div


if __name__ == "__main__":
    torch.manual_seed(0)
    print(sharpen(torch.randn(4, 10), torch.tensor(0.5)).sum(-1))
