"""InfoNCE with a temperature owned by the module."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class InfoNCE(nn.Module):
    def __init__(self, temperature: float = 0.07):
        super().__init__()
        self.temperature = temperature

    def forward(self, z1, z2):
        z1 = F.normalize(z1, dim=-1)
        z2 = F.normalize(z2, dim=-1)
        logits = z1 @ z2.t() / self.temperature  # expect: safe div
        labels = torch.arange(z1.size(0))
        return F.cross_entropy(logits, labels)


def learnable_temperature_logits(z1, z2, log_scale):
    return (z1 @ z2.t()) * log_scale.exp()  # expect: possible exp


def dice_loss(pred, target, smooth=1.0):
    inter = (pred * target).sum()
    return 1 - (2 * inter + smooth) / (pred.sum() + target.sum() + smooth)  # expect: possible div
