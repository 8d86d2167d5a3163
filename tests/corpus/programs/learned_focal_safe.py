"""Learned focal loss with the focusing exponent kept >= 1 by construction."""

import torch
import torch.nn as nn


class LearnedFocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.raw_gamma = nn.Parameter(torch.tensor(gamma - 1.0))

    def forward(self, logits, targets):
        p = torch.sigmoid(logits)
        pt = torch.where(targets > 0.5, p, 1 - p)
        # |raw| + 1 >= 1 whatever the optimiser does, and 1 - pt >= 0: no negative power of 0.
        gamma = self.raw_gamma.abs() + 1.0
        weight = (1 - pt) ** gamma  # expect: safe pow
        # pt rounds to exactly 0 on a confidently wrong anchor: the clamp keeps the log finite.
        return -(weight * torch.log(pt.clamp_min(1e-6))).mean()  # expect: safe log


if __name__ == "__main__":
    torch.manual_seed(0)
    crit = LearnedFocalLoss()
    print(crit(torch.randn(8, 5) * 30, (torch.rand(8, 5) < 0.2).float()).item())
