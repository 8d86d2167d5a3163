"""Columns count code points, not bytes."""
import torch


def f(x):
    pair = ("ünïcödé", torch.log(x))  # expect: torch.log@23 possible
    ε = 1e-6
    return pair, torch.log(x.abs() + ε)  # expect: torch.log@17 safe
