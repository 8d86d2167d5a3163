"""Printing helpers of the walkthrough, and a relative error it never computes."""
import torch


def show(title, value):
    print(f"{title}:\n    {value}")


def relative_error(pred, target):
    return torch.abs((pred - target) / target).mean()  # expect: confirmed div
