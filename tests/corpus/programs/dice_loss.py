"""Soft Dice loss for binary segmentation, the textbook formula without smoothing."""

import torch
import torch.nn as nn


def dice_loss(logits, mask):
    probs = torch.sigmoid(logits).flatten(1)
    mask = mask.flatten(1)
    inter = (probs * mask).sum(1)
    union = probs.sum(1) + mask.sum(1)
    # An empty ground-truth mask and a prediction that has saturated to 0 give 0 / 0.
    # Every image in a batch counts: NaN only for an empty batch.
    return (1 - 2 * inter / union).mean()  # expect: confirmed div


class TinySegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, x):
        return self.net(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    net = TinySegNet()
    x = torch.randn(2, 1, 16, 16)
    mask = (x > 1.0).float()
    print(dice_loss(net(x), mask).item())
