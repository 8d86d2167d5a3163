"""Logistic regression as the old tutorials wrote it: Variable(FloatTensor(list)), bare
weights, plain SGD and an endless loop that stops once the loss is NaN."""
import sys
import torch
import torch.optim as optim
from torch.autograd import Variable

x_data = [[1, 2], [2, 3], [3, 1], [4, 3], [5, 3], [6, 2]]
y_data = [[0], [0], [0], [1], [1], [1]]
x_train = Variable(torch.FloatTensor(x_data))
y_train = Variable(torch.FloatTensor(y_data))

W = torch.zeros((2, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
optimizer = optim.SGD([W, b], lr=0.35)

step = 0
while True:
    hypothesis = torch.sigmoid(x_train.matmul(W) + b)
    cost = -(y_train * torch.log(hypothesis) + (1 - y_train) * torch.log(1 - hypothesis)).mean()  # expect: confirmed log, confirmed log
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    step += 1
    if torch.isnan(cost) or torch.isinf(cost):
        print(f"non-finite loss {cost.item()} at step {step}")
        sys.exit(0)
