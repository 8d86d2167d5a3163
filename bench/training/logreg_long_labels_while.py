"""Logistic regression with integer labels (LongTensor) cast to float, weights drawn with
randn and made trainable, the loss split into its two terms."""
import sys

import torch

torch.manual_seed(0)
x_train = torch.FloatTensor([[1.0, 0.5], [2.0, 1.0], [0.5, 2.0], [3.0, 4.0], [4.0, 3.5], [5.0, 5.0]])
y_train = torch.LongTensor([[0], [0], [0], [1], [1], [1]]).float()

W = torch.randn(2, 1, requires_grad=True)
b = torch.randn(1, requires_grad=True)
optimizer = torch.optim.SGD([W, b], lr=0.15)

step = 0
while True:
    hypothesis = 1 / (1 + torch.exp(-(x_train @ W + b)))  # expect: possible exp
    positive = y_train * torch.log(hypothesis)  # expect: confirmed log
    negative = (1 - y_train) * torch.log(1 - hypothesis)  # expect: confirmed log
    cost = -(positive + negative).mean()
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    step += 1
    if torch.isnan(cost).item() or torch.isinf(cost).item():
        print(f"non-finite loss {cost.item()} at step {step}")
        sys.exit(0)
