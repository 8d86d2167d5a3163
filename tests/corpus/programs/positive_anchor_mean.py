"""Anchor-based detection loss: regression is averaged over the positive anchors only.

A batch whose images hold no object matched to any anchor leaves the positive set
empty, and `.mean()` of an empty selection is NaN (a real failure mode of
detection training on sparse data). The twin below divides the sum by the count
clamped to at least one.
"""

import torch
import torch.nn.functional as F


def box_loss(pred, target, labels):
    positive = labels > 0
    reg = F.smooth_l1_loss(pred, target, reduction="none").sum(-1)
    # No positive anchor in the batch: mean over zero elements.
    return reg[positive].mean()  # expect: possible mean


def box_loss_guarded(pred, target, labels):
    positive = labels > 0
    reg = F.smooth_l1_loss(pred, target, reduction="none").sum(-1)
    count = positive.sum().clamp_min(1)
    return reg[positive].sum() / count  # expect: safe div


def objectness(scores, labels):
    # Over every anchor: never empty for a non-empty batch, so not a mean-over-empty site.
    return F.binary_cross_entropy_with_logits(scores, (labels > 0).float(), reduction="none").mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    pred, target = torch.randn(32, 4), torch.randn(32, 4)
    labels = torch.randint(0, 3, (32,))
    scores = torch.randn(32)
    print(box_loss(pred, target, labels), box_loss_guarded(pred, target, labels), objectness(scores, labels))
