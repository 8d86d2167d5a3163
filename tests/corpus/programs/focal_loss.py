"""Sigmoid focal loss (RetinaNet) for dense binary targets, written from the paper."""

import torch


def focal_loss(logits, targets, alpha=0.25):
    p = torch.sigmoid(logits)
    pt = torch.where(targets > 0.5, p, 1 - p)
    # gamma = 2: an integer power of a value in [0, 1] cannot fail.
    weight = alpha * (1 - pt) ** 2.0  # expect: safe pow
    # A confidently wrong anchor has pt rounded to exactly 0 (logit beyond ~17 or ~-88).
    loss = -weight * torch.log(pt)  # expect: confirmed log
    num_pos = (targets > 0.5).sum()
    # An image without any positive anchor: num_pos is 0.
    return loss.sum() / num_pos  # expect: confirmed div


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = torch.randn(2, 100)
    targets = (torch.rand(2, 100) < 0.1).float()
    print(focal_loss(logits, targets).item())
