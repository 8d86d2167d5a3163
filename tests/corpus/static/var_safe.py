"""Population variance (correction 0) of one element is 0."""
import torch


def spread(x):
    a = x.var(unbiased=False)  # expect: torch.Tensor.var@8 safe
    b = torch.std(x, correction=0)  # expect: torch.std@8 safe
    c = torch.var_mean(x, correction=0)  # expect: torch.var_mean@8 safe
    return a, b, c
