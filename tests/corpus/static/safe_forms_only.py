"""Only library forms that are safe by construction: no sites."""
import torch
import torch.nn.functional as F


def losses(logits, y, a, b):
    l1 = F.cross_entropy(logits, y)
    l2 = F.binary_cross_entropy_with_logits(logits, y.float())
    l3 = torch.logsumexp(logits, dim=-1)
    l4 = F.logsigmoid(logits)
    l5 = logits.log_softmax(-1)
    l6 = torch.xlogy(a, b)
    return l1, l2, l3, l4, l5, l6
