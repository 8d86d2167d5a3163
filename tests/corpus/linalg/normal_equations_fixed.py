"""Least-squares regression with torch.linalg.lstsq on the design matrix (the fixed twin).

X^T X is singular when a feature column is zero or duplicates another (one-hot columns that
never fire in this batch, a unit recorded twice): ``torch.linalg.solve`` raises.
"""

import torch


def fit(features, targets):
    X = torch.cat([torch.ones(features.shape[0], 1), features], dim=1)
    return torch.linalg.lstsq(X, targets[:, None]).solution[:, 0]  # expect: safe inverse


torch.manual_seed(4)
features = torch.randn(16, 3)
targets = features @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(16)
print(fit(features, targets))
