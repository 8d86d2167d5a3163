"""A tutorial that builds the same logistic regression twice under the same names: first to show
one forward pass and its cost, then to train it with SGD in an endless loop."""
import torch

torch.manual_seed(0)
x_train = torch.FloatTensor([[1, 2], [2, 3], [3, 1], [4, 3], [5, 3], [6, 2]])
y_train = torch.FloatTensor([[0], [0], [0], [1], [1], [1]])

W = torch.zeros((2, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
hypothesis = torch.sigmoid(x_train.matmul(W) + b)
print(-(y_train * torch.log(hypothesis) + (1 - y_train) * torch.log(1 - hypothesis)).mean())  # expect: confirmed log, confirmed log

W = torch.zeros((2, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
optimizer = torch.optim.SGD([W, b], lr=1)

step = 0
while True:
    hypothesis = torch.sigmoid(x_train.matmul(W) + b)
    cost = -(y_train * torch.log(hypothesis) + (1 - y_train) * torch.log(1 - hypothesis)).mean()  # expect: confirmed log, confirmed log
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    step += 1
    if not torch.isfinite(cost):
        print(f"non-finite loss {cost.item()} at step {step}")
        break
