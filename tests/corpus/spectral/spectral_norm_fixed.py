"""A spectral-norm penalty from matrix_norm(ord=2), the singular value alone (the fixed twin).

sigma_max(W) = u_1^T W v_1 with the top singular vectors of W. A layer initialised to the
identity (``nn.init.eye_``, a common residual init) has every singular value equal to 1: the
backward pass through ``torch.linalg.svd`` is NaN from the very first step.
"""

import torch
from torch import nn

torch.manual_seed(4)
layer = nn.Linear(4, 4)
nn.init.eye_(layer.weight)
x = torch.randn(8, 4)
y = torch.randn(8, 4)

W = layer.weight
sigma_max = torch.linalg.matrix_norm(W, ord=2)  # expect: safe spectral
loss = ((layer(x) - y) ** 2).mean() + 0.1 * sigma_max
loss.backward()
print(loss.item())
