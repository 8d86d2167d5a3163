"""Least-squares regression through the normal equations.

X^T X is singular when a feature column is zero or duplicates another (one-hot columns that
never fire in this batch, a unit recorded twice): ``torch.linalg.solve`` raises.
"""

import torch


def fit(features, targets):
    X = torch.cat([torch.ones(features.shape[0], 1), features], dim=1)
    return torch.linalg.solve(X.T @ X, X.T @ targets)  # expect: confirmed inverse


torch.manual_seed(4)
features = torch.randn(16, 3)
targets = features @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(16)
print(fit(features, targets))
