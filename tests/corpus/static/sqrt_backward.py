"""sqrt is finite at 0 but its gradient is not: pairwise distances of equal points."""
import torch


def distance(a, b):
    d2 = ((a - b) ** 2).sum(-1)
    bad = torch.sqrt(d2)  # expect: torch.sqrt@10 possible
    good = torch.sqrt(d2 + 1e-12)  # expect: torch.sqrt@11 safe
    return bad, good
