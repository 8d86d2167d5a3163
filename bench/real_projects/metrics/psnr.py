"""Image-quality metrics."""
import math

import torch
import torch.nn.functional as F


def psnr_scalar(pred, target):
    mse = F.mse_loss(pred, target).item()
    return 10 * math.log10(1 / mse)  # expect: safe log, safe div


def psnr_tensor(pred, target):
    mse = ((pred - target) ** 2).mean(dim=(1, 2, 3))
    return 10 * torch.log10(1.0 / mse)  # expect: possible log, possible div


def psnr_stable(pred, target, eps=1e-10):
    mse = ((pred - target) ** 2).mean(dim=(1, 2, 3))
    return 10 * torch.log10(1.0 / (mse + eps))  # expect: unproven log, safe div
