"""Focal loss whose focusing parameter gamma is learned with the model.

gamma is an unconstrained parameter: once an update takes it below 0, an anchor
the model gets confidently right (pt rounds to exactly 1) raises 0 to a negative
power, and the loss is inf.
"""

import torch
import torch.nn as nn


class LearnedFocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = nn.Parameter(torch.tensor(gamma))

    def forward(self, logits, targets):
        p = torch.sigmoid(logits)
        pt = torch.where(targets > 0.5, p, 1 - p)
        weight = (1 - pt) ** self.gamma  # expect: confirmed pow
        return -(weight * torch.log(pt.clamp_min(1e-6))).mean()  # expect: safe log


if __name__ == "__main__":
    torch.manual_seed(0)
    crit = LearnedFocalLoss()
    print(crit(torch.randn(8, 5), (torch.rand(8, 5) < 0.2).float()).item())
