"""atanh of a tanh output: tanh saturates to exactly 1 in float32."""
import torch


def inverse(x):
    a = torch.atanh(torch.tanh(x))  # expect: torch.atanh@8 possible
    b = x.arctanh()  # expect: torch.Tensor.arctanh@8 possible
    return a, b
