"""In float16, 1e-8 rounds to 0: only a representable eps guards the log."""
import torch


def entropy(logits):
    p = torch.softmax(logits.half(), dim=-1)
    a = torch.log(p + 1e-8)  # expect: torch.log@8 possible
    b = torch.log(p + 1e-3)  # expect: torch.log@8 safe
    return a, b


def attend(scores, mask):
    # -1e9 is a finite fill in float32, but -inf in float16: a fully masked row is NaN
    a = scores.half().masked_fill(mask, -1e9).softmax(-1)  # expect: torch.Tensor.softmax@8 possible
    b = scores.half().masked_fill(mask, -1e4).softmax(-1)
    return a, b
