"""Softmax regression with bare weight tensors, one-hot labels made by scatter, the
cross-entropy written out by hand, and a learning-rate warm-up that was never capped; the
loop runs until the loss stops being finite."""
import sys

import torch
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(1)
x_train = torch.FloatTensor([[1, 2, 1, 1], [2, 1, 3, 2], [3, 1, 3, 4], [4, 1, 5, 5],
                             [1, 7, 5, 5], [1, 2, 5, 6], [1, 6, 6, 6], [1, 7, 7, 7]])
y_train = torch.LongTensor([2, 2, 2, 1, 1, 1, 0, 0])
y_one_hot = torch.zeros(8, 3)
y_one_hot.scatter_(1, y_train.unsqueeze(1), 1)

W = torch.zeros((4, 3), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
optimizer = optim.SGD([W, b], lr=0.01)

step = 0
while True:
    z = x_train.matmul(W) + b
    cost = (y_one_hot * -torch.log(F.softmax(z, dim=1))).sum(dim=1).mean()  # expect: confirmed log
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] *= 1.0003
    step += 1
    if not torch.isfinite(cost):
        print(f"non-finite loss {cost.item()} at step {step}")
        sys.exit(0)
