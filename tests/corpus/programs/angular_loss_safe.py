"""Angular loss with torch's cosine_similarity and the cosine clamped inside (-1, 1)."""

import torch
import torch.nn.functional as F


def angle_between(pred, target):
    cos = F.cosine_similarity(pred, target, dim=1, eps=1e-8)
    # Clamped strictly inside (-1, 1): acos and its gradient stay finite.
    return torch.acos(cos.clamp(-1 + 1e-6, 1 - 1e-6))  # expect: safe acos


if __name__ == "__main__":
    torch.manual_seed(0)
    a = torch.randn(8, 3)
    print(angle_between(a, a.clone()).sum().item(), angle_between(a, -a).sum().item())
