"""The same losses, guarded."""
import torch


def iou(box1, box2):
    area1 = (box1[:, 2] - box1[:, 0]) * (box1[:, 3] - box1[:, 1])
    area2 = (box2[:, 2] - box2[:, 0]) * (box2[:, 3] - box2[:, 1])
    wh = (torch.min(box1[:, 2:], box2[:, 2:]) - torch.max(box1[:, :2], box2[:, :2])).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    union = (area1 + area2 - inter).clamp(min=1e-6)
    return inter / union  # expect: torch.Tensor.__truediv__@11 safe


def encode(w, n):
    anchor_w = torch.full((n,), 16.0)
    return torch.log((w / anchor_w).clamp_min(1e-6))  # expect: torch.log@11 safe; torch.Tensor.__truediv__@22 safe
