"""Free logits re-wrapped as a Variable each step and only watched: no optimizer, no backward.
The softmax underflows only once the logits are ~104 apart, far beyond the rand() they start at."""
import sys

import torch
import torch.nn.functional as F
from torch.autograd import Variable

torch.manual_seed(1)
z = torch.rand(3, 5, requires_grad=True)
y = torch.randint(5, (3,)).long()
y_one_hot = torch.zeros_like(z)
y_one_hot.scatter_(1, y.unsqueeze(1), 1)

step = 0
while True:
    z = Variable(z, requires_grad=True)
    hypothesis = F.softmax(z, dim=1)
    cost = (y_one_hot * -torch.log(hypothesis)).sum(dim=1).mean()  # expect: confirmed log
    step += 1
    if torch.isnan(cost) or torch.isinf(cost):
        print(f"non-finite loss {cost.item()} at step {step}")
        sys.exit(0)
