"""Focal loss and a soft-margin ranking loss."""
import torch
import torch.nn.functional as F


def focal_loss(logits, targets, gamma=2.0, alpha=0.25):
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)  # expect: unproven pow
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return (alpha_t * loss).mean()


def focal_loss_clamped(logits, targets, gamma=2.0):
    p = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
    return -(targets * (1 - p) ** gamma * torch.log(p)).mean()  # expect: safe pow, safe log


def soft_margin_ranking(pos, neg):
    margin = neg - pos
    return torch.log1p(torch.exp(margin)).mean()  # expect: possible exp
