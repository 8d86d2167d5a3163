"""rsqrt of a variance that is 0 for a constant row."""
import torch


def whiten(x):
    var = x.var(-1, keepdim=True)  # expect: torch.Tensor.var@10 possible
    return x * torch.rsqrt(var)  # expect: torch.rsqrt@15 possible
