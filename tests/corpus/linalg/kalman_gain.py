"""The update step of a Kalman filter with two sensors.

The innovation covariance S = H P H^T + R is singular when the sensors' noise is zero and their
rows of H coincide (two sensors reading the same state), and ``Tensor.inverse`` raises.
"""

import torch


def update(mean, cov_factor, H, noise_std, z):
    P = cov_factor @ cov_factor.T
    S = H @ P @ H.T + torch.diag(noise_std**2)
    gain = P @ H.T @ S.inverse()  # expect: confirmed inverse
    return mean + gain @ (z - H @ mean), P - gain @ H @ P


torch.manual_seed(5)
mean = torch.zeros(3)
cov_factor = torch.randn(3, 3)
H = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.5]])
noise_std = 0.1 + 0.05 * torch.rand(2)
z = torch.randn(2)
print(update(mean, cov_factor, H, noise_std, z))
