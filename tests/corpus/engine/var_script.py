"""Per-feature variance of a batch: NaN as soon as a batch holds one row."""
import torch


def feature_variance(h):
    return h.var(dim=0)  # bug: var of one element (correction 1)


def normalize_rows(x):
    return x / x.sum(dim=1, keepdim=True)  # bug: a row summing to zero


h = torch.randn(8, 4)
print(feature_variance(h), normalize_rows(h))
