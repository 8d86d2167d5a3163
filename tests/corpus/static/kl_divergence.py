"""KL divergence between two softmax distributions, unguarded and guarded."""
import torch
import torch.nn.functional as F


def kl(logits_p, logits_q):
    p = F.softmax(logits_p, dim=-1)
    q = F.softmax(logits_q, dim=-1)
    bad = (p * (p / q).log()).sum(-1)  # expect: torch.Tensor.log@15 possible; torch.Tensor.__truediv__@16 possible
    good = (p * (p.clamp_min(1e-8).log() - q.clamp_min(1e-8).log())).sum(-1)  # expect: torch.Tensor.log@17 safe; torch.Tensor.log@43 safe
    return bad, good
