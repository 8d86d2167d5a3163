"""In float16, 1e-8 rounds to 0: only a representable eps guards the log."""
import torch


def entropy(logits):
    p = torch.softmax(logits.half(), dim=-1)
    a = torch.log(p + 1e-8)  # expect: torch.log@8 possible
    b = torch.log(p + 1e-3)  # expect: torch.log@8 safe
    return a, b
