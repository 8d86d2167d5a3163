"""Focal loss whose focusing parameter gamma is learned with the model.

gamma is an unconstrained parameter: once an update takes it below 0, an anchor
the model gets confidently right (pt rounds to exactly 1) raises 0 to a negative
power, and the loss is inf. And the log of pt is unguarded: an anchor the model
gets confidently wrong (pt rounds to exactly 0) gives -inf.
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
        # possible rather than confirmed: it takes an update that moves gamma below 0 while
        # the base is 0, and the engine's distance for pow steers the base only.
        weight = (1 - pt) ** self.gamma  # expect: possible pow
        return -(weight * torch.log(pt)).mean()  # expect: confirmed log


if __name__ == "__main__":
    torch.manual_seed(0)
    crit = LearnedFocalLoss()
    print(crit(torch.randn(8, 5), (torch.rand(8, 5) < 0.2).float()).item())
