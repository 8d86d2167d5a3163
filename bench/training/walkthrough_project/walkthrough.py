"""A tutorial walked through step by step: the same log of one softmax printed several ways, then
an endless loop over fresh labels. The helper module it imports has a division the script never
reaches."""
import torch
import torch.nn.functional as F

import report

torch.manual_seed(5)
scores = torch.rand(2, 4, requires_grad=True)
probs = F.softmax(scores, dim=1)
labels = torch.randint(4, (2,))
one_hot = torch.zeros_like(probs)
one_hot.scatter_(1, labels.unsqueeze(1), 1)

report.show("log of probs", torch.log(probs))  # expect: confirmed log
report.show("weighted", one_hot * -torch.log(probs))  # expect: confirmed log
report.show("per row", (one_hot * -torch.log(probs)).sum(dim=1))  # expect: confirmed log
cost = (one_hot * -torch.log(probs)).sum(dim=1).mean()  # expect: confirmed log
report.show("cost", cost)

while True:
    scores = torch.autograd.Variable(scores, requires_grad=True)
    probs = F.softmax(scores, dim=1)
    labels = torch.randint(4, (2,))
    one_hot = torch.zeros_like(probs)
    one_hot.scatter_(1, labels.unsqueeze(1), 1)
    loss = (one_hot * -torch.log(probs)).sum(dim=1).mean()  # expect: confirmed log
    if not torch.isfinite(loss):
        report.show("non-finite loss", loss)
        break
