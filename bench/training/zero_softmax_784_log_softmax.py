"""Softmax regression as the tutorials write it: bare zero-initialised weights, 784 pixel
features in [0, 1], 100-row batches, one-hot labels, the cross-entropy by hand from log_softmax: the quiet twin of zero_softmax_784_sgd.py."""
import torch

torch.manual_seed(0)
n = 600
x = torch.rand(n, 784)
labels = torch.randint(0, 10, (n,))
y = torch.nn.functional.one_hot(labels, 10).float()

W = torch.zeros(784, 10, requires_grad=True)
b = torch.zeros(10, requires_grad=True)
opt = torch.optim.SGD([W, b], lr=0.5)

for epoch in range(20):
    for i in range(n // 100):
        pred = torch.log_softmax(x[i * 100:(i + 1) * 100] @ W + b, dim=1)
        cost = torch.mean(-torch.sum(y[i * 100:(i + 1) * 100] * pred, dim=1))  # expect: possible mean
        opt.zero_grad()
        cost.backward()
        opt.step()
    print(f"epoch {epoch} cost {cost.item():.4f}")
