"""Newton's method (IRLS) for logistic regression.

The Hessian X^T diag(p (1 - p)) X loses rank when the probabilities saturate at 0 or 1 (they do,
exactly, in float32, for separable data) or when the features carry no information:
``torch.linalg.solve`` then refuses the singular system.
"""

import torch

torch.manual_seed(3)
X = torch.randn(20, 3)
y = (X[:, 0] + 0.5 * X[:, 1] > 0).float()
w = torch.zeros(3)
for _ in range(3):
    p = torch.sigmoid(X @ w)
    grad = X.T @ (p - y)
    hessian = X.T @ (X * (p * (1 - p))[:, None])
    w = w - torch.linalg.solve(hessian, grad)  # expect: confirmed inverse
print(w)
