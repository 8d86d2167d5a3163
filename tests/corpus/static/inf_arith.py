"""Arithmetic on an infinity the program put there: 0 * -inf and inf - inf are NaN. A product or
contraction is a site when either operand may hold such an infinity; a sum or difference only
when both may (an additive -inf mask on finite scores is the intended -inf, not NaN)."""
import torch
import torch.nn.functional as F


def masked_entropy(scores, mask):
    masked = scores.masked_fill(~mask, float("-inf"))
    p = F.softmax(masked, dim=-1)  # expect: torch.nn.functional.softmax@8 possible
    logp = F.log_softmax(masked, dim=-1)  # expect: torch.nn.functional.log_softmax@11 possible
    h = -(p * logp).sum(-1)  # expect: torch.Tensor.__mul__@10 possible
    q = p * 2.0
    return h, q


def additive_mask(scores):
    n = scores.shape[-1]
    causal = torch.full((n, n), float("-inf")).triu(1)
    return torch.softmax(scores + causal, dim=-1)  # expect: torch.softmax@11 possible


def shifted(scores, mask):
    s = scores.masked_fill(mask, -torch.inf)
    return s - s.max(-1, keepdim=True).values  # expect: torch.Tensor.__sub__@11 possible


def contractions(logits, mask, v):
    neg = logits.masked_fill(mask, float("-inf"))
    a = torch.matmul(neg, v)  # expect: torch.matmul@8 possible
    b = torch.einsum("ij,jk->ik", neg, v)  # expect: torch.einsum@8 possible
    c = neg @ v  # expect: torch.Tensor.__matmul__@8 possible
    return a, b, c


def nearest(d, eye, weight):
    far = d.masked_fill(eye, float("inf"))
    half = far.min(-1).values * 0.5
    return half, far.min(-1).values * weight  # expect: torch.Tensor.__mul__@17 possible


def kept_finite(scores, mask):
    lowest = torch.finfo(scores.dtype).min
    s = scores.masked_fill(~mask, lowest)
    p = torch.softmax(s, -1)
    clean = torch.nan_to_num(scores.masked_fill(~mask, float("-inf")))
    return p * s, clean * 0.0, torch.sigmoid(scores.masked_fill(mask, float("-inf"))) * 3
