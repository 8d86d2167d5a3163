"""Pseudo-label sharpening with the temperature configured in log space.

exp keeps the temperature positive; the in-file callers pass log(0.5) (the
default) and log(0.25), so the exponent 1 / T lies in [2, 4]. Adding 1e-8 to the
probabilities keeps every sharpened term >= 1e-32, so each row's sum is positive.
"""

import math

import torch


def sharpen(logits, log_temperature=math.log(0.5)):
    p = torch.softmax(logits, dim=-1)
    inv_t = 1.0 / math.exp(log_temperature)  # expect: safe exp
    q = (p + 1e-8) ** inv_t  # expect: safe pow
    return q / q.sum(-1, keepdim=True)  # expect: safe div


def sharpened_targets(logits):
    """A mild and a strong sharpening of the same predictions."""
    return sharpen(logits), sharpen(logits, math.log(0.25))


if __name__ == "__main__":
    torch.manual_seed(0)
    mild, strong = sharpened_targets(torch.randn(4, 10) * 50)
    print(mild.sum(-1), strong.sum(-1))
