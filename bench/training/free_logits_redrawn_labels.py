"""Free logits watched in an endless loop that draws new labels every iteration: each draw is an
input of its own, and the loop never calls backward. The softmax underflows once the logits are
~104 apart."""
import torch
import torch.nn.functional as F

torch.manual_seed(3)
logits = torch.rand(4, 6, requires_grad=True)

while True:
    logits = torch.autograd.Variable(logits, requires_grad=True)
    probs = F.softmax(logits, dim=1)
    labels = torch.randint(6, (4,))
    targets = torch.zeros_like(probs)
    targets.scatter_(1, labels.unsqueeze(1), 1)
    nll = (targets * -torch.log(probs)).sum(dim=1).mean()  # expect: confirmed log
    if torch.isnan(nll) or torch.isinf(nll):
        print(f"non-finite loss {nll.item()}")
        break
