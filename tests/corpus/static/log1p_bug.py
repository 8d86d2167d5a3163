"""log1p of -p reaches log1p(-1) = -inf when p hits 1."""
import torch


def survival(n):
    p = torch.rand(n)
    return torch.log1p(-p)  # expect: torch.log1p@11 possible
