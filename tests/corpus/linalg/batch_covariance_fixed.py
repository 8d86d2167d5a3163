"""Log-determinant of a shrunk feature covariance (the fixed twin).

With fewer distinct samples than feature dimensions (a small last batch, repeated
examples) the sample covariance is singular and its log-determinant -inf.
"""

import torch
import torch.nn as nn

torch.manual_seed(4)
encoder = nn.Linear(6, 4)
batch = torch.randn(12, 6)

h = torch.tanh(encoder(batch))
cov = 0.9 * torch.cov(h.T) + 0.1 * torch.eye(4)  # shrinkage towards the identity
volume = torch.logdet(cov)  # expect: unproven logdet
loss = h.pow(2).mean() - 0.01 * volume
loss.backward()
