"""Feature-statistics regularisers: DeepInversion-style BN matching and a style loss.

Both take unbiased variances; a batch of one image, or a feature map pooled
down to 1x1, leaves a single element and the unbiased variance is NaN.
"""

import torch
import torch.nn as nn


def bn_matching_loss(feats, running_mean, running_var):
    """feats: (B, C, H, W) activations of one layer for the synthesised batch."""
    # Spatial positions of all images are pooled, so B*H*W >= 1: NaN only for an empty batch.
    mean = feats.mean(dim=(0, 2, 3))
    var = feats.permute(1, 0, 2, 3).flatten(1).var(1)  # expect: confirmed var
    return (mean - running_mean).norm() + (var - running_var).norm()


def style_statistics(feats):
    """Per-image, per-channel std over positions (AdaIN style statistics)."""
    flat = feats.flatten(2)
    return flat.std(-1)  # expect: confirmed var


def batch_feature_spread(embeddings):
    """Per-dimension spread over the batch, population form: defined for one sample."""
    return embeddings.var(0, correction=0)  # expect: safe var


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


if __name__ == "__main__":
    torch.manual_seed(0)
    net = TinyCNN()
    f = net(torch.randn(4, 3, 16, 16))
    print(bn_matching_loss(f, torch.zeros(4), torch.ones(4)).item(), style_statistics(f).shape)
    print(batch_feature_spread(f.flatten(1)).shape)
