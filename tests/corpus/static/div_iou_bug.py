"""Detection losses: IoU and log-space box deltas."""
import torch


def iou(box1, box2):
    area1 = (box1[:, 2] - box1[:, 0]) * (box1[:, 3] - box1[:, 1])
    area2 = (box2[:, 2] - box2[:, 0]) * (box2[:, 3] - box2[:, 1])
    lt = torch.max(box1[:, :2], box2[:, :2])
    rb = torch.min(box1[:, 2:], box2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    union = area1 + area2 - inter
    return inter / union  # expect: torch.Tensor.__truediv__@11 possible


def encode(w, anchor_w):
    return torch.log(w / anchor_w)  # expect: torch.log@11 possible; torch.Tensor.__truediv__@21 possible
