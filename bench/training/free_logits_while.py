"""Free logits as data: torch.rand(..., requires_grad=True) fed to a linear layer that an
optimizer trains (the logits themselves are never optimised), in an endless loop."""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
z = torch.rand(3, 5, requires_grad=True)
y = torch.randint(5, (3,)).long()
y_one_hot = torch.zeros_like(z)
y_one_hot.scatter_(1, y.unsqueeze(1), 1)

layer = torch.nn.Linear(5, 5)
optimizer = torch.optim.SGD(layer.parameters(), lr=1.0)

step = 0
while True:
    hypothesis = F.softmax(layer(z), dim=1)
    cost = (y_one_hot * -torch.log(hypothesis)).sum(dim=1).mean()  # expect: confirmed log
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    step += 1
    if torch.isnan(cost) or torch.isinf(cost):
        print(f"non-finite loss {cost.item()} at step {step}")
        sys.exit(0)
