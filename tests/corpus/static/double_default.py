"""A float64 program: exp overflows only past ln(max of float64) ~ 709.7."""
import torch

torch.set_default_dtype(torch.float64)


def likelihood(x):
    a = torch.exp(x.clamp(max=300.0))  # expect: torch.exp@8 safe
    b = torch.exp(x.clamp(max=800.0))  # expect: torch.exp@8 possible
    return a, b
