"""Masked attention: a fully masked row is all -inf before the softmax."""
import torch
import torch.nn.functional as F


def attend(q, k, mask):
    scores = q @ k.transpose(-1, -2)
    scores = scores.masked_fill(mask, float("-inf"))
    attn = F.softmax(scores, dim=-1)  # expect: torch.nn.functional.softmax@11 possible
    ent = -(attn * torch.log(attn)).sum(-1)  # expect: torch.log@19 possible
    norm = attn / attn.sum(-1, keepdim=True)  # expect: torch.Tensor.__truediv__@11 possible
    ent2 = -(attn * (attn + 1e-9).log()).sum(-1)  # expect: torch.Tensor.log@20 safe
    return ent, norm, ent2
