"""V-Net Dice loss: squared sums in the denominator plus a smoothing constant."""

import torch


def dice_loss(logits, mask, smooth=1.0):
    probs = torch.sigmoid(logits).flatten(1)
    mask = mask.flatten(1)
    inter = (probs * mask).sum(1)
    # Squares are >= 0, so the denominator is at least 1e-6.
    denom = (probs ** 2).sum(1) + (mask ** 2).sum(1) + 1e-6
    dice = (2 * inter + smooth) / denom  # expect: safe div
    return (1 - dice).mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = torch.randn(2, 1, 16, 16)
    print(dice_loss(logits, torch.zeros(2, 1, 16, 16)).item())
