"""Sigmoid focal loss the torchvision way: BCE with logits, pt recovered with exp(-ce)."""

import torch
import torch.nn.functional as F


def sigmoid_focal_loss(logits, targets, alpha=0.25):
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    # ce >= 0, so exp(-ce) lies in (0, 1].
    pt = torch.exp(-ce)  # expect: unproven exp
    loss = ce * (1 - pt) ** 2.0  # expect: safe pow
    loss = torch.where(targets > 0.5, alpha * loss, (1 - alpha) * loss)
    # At least one positive is assumed in the normaliser, as detectors do.
    num_pos = (targets > 0.5).sum().clamp(min=1.0)
    return loss.sum() / num_pos  # expect: safe div


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = torch.randn(2, 100) * 20
    targets = torch.zeros(2, 100)
    print(sigmoid_focal_loss(logits, targets).item())
