"""Bilinear pooling for fine-grained recognition, with signed-square-root normalisation.

The paper's "x <- sign(x) sqrt(|x|)" is sometimes shortened to x ** 0.5, which is
NaN for every negative entry of the (signed) bilinear feature.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def bilinear_pool(feats):
    """feats: (B, C, H, W) -> (B, C*C) outer-product pooling."""
    b, c, h, w = feats.shape
    x = feats.flatten(2)
    # Only an empty (0 x W) feature map divides by zero, and nothing here empties feats.
    return (x @ x.transpose(1, 2)).flatten(1) / (h * w)  # expect: safe div


def signed_sqrt(x):
    return torch.sign(x) * torch.sqrt(torch.abs(x) + 1e-10)  # expect: safe sqrt


def naive_power_norm(x):
    return x ** 0.5  # expect: confirmed pow


def relu_power_norm(x):
    # A ReLU output is >= 0: the fractional power is defined everywhere.
    return torch.pow(torch.relu(x), 0.75)  # expect: safe pow


class BilinearHead(nn.Module):
    def __init__(self, channels=8, n_classes=5, naive=False):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc = nn.Linear(channels * channels, n_classes)
        self.naive = naive

    def forward(self, images):
        z = bilinear_pool(self.conv(images))
        z = naive_power_norm(z) if self.naive else signed_sqrt(z)
        return self.fc(F.normalize(z, dim=1))


if __name__ == "__main__":
    torch.manual_seed(0)
    images = torch.randn(2, 3, 8, 8)
    print(BilinearHead()(images).shape, relu_power_norm(images).shape)
