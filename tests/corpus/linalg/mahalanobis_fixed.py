"""Mahalanobis anomaly scores through the pseudo-inverse of the covariance (the fixed twin).

The covariance of the reference batch is singular when a feature is constant over it (a dead
sensor, a padded channel) or when the batch repeats one vector: ``torch.inverse`` raises.
"""

import torch


def anomaly_scores(reference, queries):
    mu = reference.mean(0)
    cov = torch.cov(reference.T)
    precision = torch.linalg.pinv(cov, hermitian=True)  # expect: safe inverse
    diff = queries - mu
    return ((diff @ precision) * diff).sum(-1)


torch.manual_seed(2)
reference = torch.randn(12, 3) * torch.tensor([1.0, 0.5, 2.0])
queries = torch.randn(4, 3)
print(anomaly_scores(reference, queries))
