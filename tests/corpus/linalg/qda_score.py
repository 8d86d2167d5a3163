"""Quadratic discriminant analysis: class scores from per-class Gaussian fits.

Each class covariance is a scatter matrix of the class's samples; a class with fewer
samples than features (or collinear ones) gives a singular covariance, -inf log-determinant.
"""

import torch


def class_score(samples, query):
    mu = samples.mean(0)
    centred = samples - mu
    scatter = centred.T @ centred
    solved = torch.linalg.lstsq(scatter, (query - mu)[:, None]).solution[:, 0]
    return -0.5 * (query - mu) @ solved - 0.5 * torch.logdet(scatter)  # expect: confirmed logdet


torch.manual_seed(5)
samples = torch.randn(5, 3)
query = torch.randn(3)
print(float(class_score(samples, query)) < 1e9)
