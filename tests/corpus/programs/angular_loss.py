"""Angular (geodesic) loss between predicted and target direction vectors.

The cosine is written out by hand and fed straight into acos. Rounding makes
the cosine of two parallel vectors land just above 1, and a zero-length
prediction divides by 0.
"""

import torch
import torch.nn as nn


def angle_between(pred, target):
    dot = (pred * target).sum(dim=1)
    norms = pred.norm(dim=1) * target.norm(dim=1)
    cos = dot / norms  # expect: confirmed div
    return torch.acos(cos)  # expect: confirmed acos


class DirectionHead(nn.Module):
    def __init__(self, n_in=16):
        super().__init__()
        self.fc = nn.Linear(n_in, 3)

    def forward(self, feats):
        return self.fc(feats)


if __name__ == "__main__":
    torch.manual_seed(0)
    head = DirectionHead()
    feats = torch.randn(8, 16)
    target = torch.randn(8, 3)
    print(angle_between(head(feats), target).sum().item())
