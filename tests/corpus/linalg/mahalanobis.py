"""Anomaly scores as Mahalanobis distances to a reference batch of feature vectors.

The covariance of the reference batch is singular when a feature is constant over it (a dead
sensor, a padded channel) or when the batch repeats one vector: ``torch.inverse`` raises.
"""

import torch


def anomaly_scores(reference, queries):
    mu = reference.mean(0)
    cov = torch.cov(reference.T)
    precision = torch.inverse(cov)  # expect: confirmed inverse
    diff = queries - mu
    return ((diff @ precision) * diff).sum(-1)


torch.manual_seed(2)
reference = torch.randn(12, 3) * torch.tensor([1.0, 0.5, 2.0])
queries = torch.randn(4, 3)
print(anomaly_scores(reference, queries))
