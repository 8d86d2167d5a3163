"""Logistic regression trained by hand: each update rebinds W and b to new tensors."""
import sys

import torch

x_train = torch.FloatTensor([[1, 2], [2, 3], [3, 1], [4, 3], [5, 3], [6, 2]])
y_train = torch.FloatTensor([[0], [0], [0], [1], [1], [1]])
W = torch.zeros(2, 1)
b = torch.zeros(1)
lr = 0.5

step = 0
while True:
    W.requires_grad_(True)
    b.requires_grad_(True)
    hypothesis = torch.sigmoid(x_train.matmul(W) + b)
    cost = -(y_train * torch.log(hypothesis) + (1 - y_train) * torch.log(1 - hypothesis)).mean()  # expect: confirmed log, confirmed log
    cost.backward()
    with torch.no_grad():
        W = W - lr * W.grad
        b = b - lr * b.grad
    step += 1
    if torch.isnan(cost) or torch.isinf(cost):
        print(f"non-finite loss {cost.item()} at step {step}")
        sys.exit(0)
