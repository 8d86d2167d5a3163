"""RMSNorm: mean of squares plus eps."""
import torch


def rms_norm(x, weight):
    ms = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(ms + 1e-6) * weight  # expect: torch.rsqrt@15 safe
