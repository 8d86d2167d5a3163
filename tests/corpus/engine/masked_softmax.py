"""Attention over padded keys: a query whose keys are all padding gets a row of -inf scores,
and softmax turns that row into NaN."""
import torch


def attend(scores, mask):
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)  # bug: a fully masked row


def attend_safe(scores, mask):
    mask = mask.clone()
    mask[:, 0] = True  # every row keeps its first key, so no row is entirely -inf
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # safe: one key per row


scores = torch.randn(3, 5)
mask = torch.tensor([[True, True, False, False, False],
                     [True, True, True, True, False],
                     [True, False, True, False, False]])
print(attend(scores, mask), attend_safe(scores, mask))
