"""Box-regression losses of a one-stage detector, on synthetic anchors and ground truth.

    python examples/box_regression.py

Three pieces every detection code base has: the IoU between predicted and
ground-truth boxes (xyxy), the (dx, dy, log dw, log dh) encoding of a ground-truth
box against its anchor, and a YOLO-v1 style size term on square roots of widths.
Degenerate annotations (zero-width or flipped boxes) and raw, unconstrained
size predictions are what break them.
"""

import torch
import torch.nn as nn


def box_iou(pred, gt):
    """Element-wise IoU of two (N, 4) xyxy box sets."""
    iw = (torch.min(pred[:, 2], gt[:, 2]) - torch.max(pred[:, 0], gt[:, 0])).clamp(min=0)
    ih = (torch.min(pred[:, 3], gt[:, 3]) - torch.max(pred[:, 1], gt[:, 1])).clamp(min=0)
    inter = iw * ih
    area_p = (pred[:, 2] - pred[:, 0]) * (pred[:, 3] - pred[:, 1])
    area_g = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
    union = area_p + area_g - inter
    # Two zero-area boxes (a collapsed prediction on a degenerate label) give 0 / 0.
    return inter / union  # expect: confirmed div


def encode(gt, anchors):
    """Regression targets of gt boxes relative to their anchors (Faster R-CNN parameterisation)."""
    # Anchor sizes come from the config; clamping makes a zero-size anchor harmless.
    aw = (anchors[:, 2] - anchors[:, 0]).clamp(min=1.0)
    ah = (anchors[:, 3] - anchors[:, 1]).clamp(min=1.0)
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    dx = (gx - ax) / aw  # expect: safe div
    dy = (gy - ay) / ah  # expect: safe div
    # A zero-width ground-truth box gives log(0) = -inf, a flipped one log of a negative.
    dw = torch.log(gw / aw)  # expect: confirmed log, safe div
    dh = torch.log(gh / ah)  # expect: confirmed log, safe div
    return torch.stack([dx, dy, dw, dh], dim=1)


def yolo_size_loss(pred_wh, gt_wh):
    """YOLO-v1: compare square roots so small boxes weigh more. pred_wh is a raw head output."""
    # The head is linear: a negative predicted width makes sqrt NaN.
    pred_root = torch.sqrt(pred_wh)  # expect: confirmed sqrt
    # Ground truth is clamped away from zero, so this root and its gradient are finite.
    gt_root = gt_wh.clamp(min=1e-6).sqrt()  # expect: safe sqrt
    return ((pred_root - gt_root) ** 2).sum(1)


class BoxHead(nn.Module):
    """Predicts, per feature vector, anchor deltas and a box as (x1, y1, w, h)."""

    def __init__(self, dim=32):
        super().__init__()
        self.fc = nn.Linear(dim, 8)

    def forward(self, feats):
        out = self.fc(feats)
        return out[:, :4], out[:, 4:6] * 64.0, 16.0 + 4.0 * out[:, 6:]


def detection_loss(head, feats, gt, anchors):
    deltas, xy, wh = head(feats)
    pred = torch.cat([xy, xy + wh], dim=1)
    iou_loss = 1.0 - box_iou(pred, gt)
    reg_loss = (deltas - encode(gt, anchors)).abs().sum(1)
    size_loss = yolo_size_loss(wh, gt[:, 2:] - gt[:, :2])
    # Every batch below holds boxes; an empty one would make these means NaN.
    return iou_loss.mean() + reg_loss.mean() + 0.01 * size_loss.mean()


def synthetic_boxes(n, generator):
    xy = torch.rand(n, 2, generator=generator) * 48.0
    wh = 8.0 + torch.rand(n, 2, generator=generator) * 24.0
    gt = torch.cat([xy, xy + wh], dim=1)
    anchors = torch.cat([xy.round(), xy.round() + 16.0], dim=1)
    return gt, anchors


def main(steps=10, n=64, seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    head = BoxHead()
    opt = torch.optim.SGD(head.parameters(), lr=1e-3)
    for step in range(steps):
        gt, anchors = synthetic_boxes(n, g)
        feats = torch.randn(n, 32, generator=g)
        loss = detection_loss(head, feats, gt, anchors)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
