"""In-place and base-2/10 forms."""
import torch


def transform(x):
    x.log_()  # expect: torch.Tensor.log_@4 possible
    y = x.abs() + 1
    y.log_()  # expect: torch.Tensor.log_@4 safe
    z = x.log2()  # expect: torch.Tensor.log2@8 possible
    w = torch.log10(torch.ones(3))  # expect: torch.log10@8 safe
    return y + z + w
