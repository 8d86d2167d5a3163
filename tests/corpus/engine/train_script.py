"""A training script whose hand-written cross-entropy takes log of a softmax."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 3)

    def forward(self, x):
        return self.fc(x)


def loss_fn(logits, y):
    p = torch.softmax(logits, dim=1)
    nll = -torch.log(p)  # bug: log(0) once one logit dominates
    smooth = -torch.log(p + 1e-10)  # safe: bounded below by log(1e-10)
    shifted = torch.exp(logits - logits.max(dim=1, keepdim=True).values)  # safe: exponent <= 0
    return nll.gather(1, y[:, None]).mean() + 0.0 * smooth.mean() + 0.0 * shifted.mean()


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(100000):  # far too long to run: the engine must stop at the site
    x = torch.randn(16, 10)
    y = torch.randint(0, 3, (16,))
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
