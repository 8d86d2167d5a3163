"""A small U-Net trained with a hand-written dice loss on 64x64 masks."""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def block(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU()
    )


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.d3 = block(1, 32), block(32, 64), block(64, 128)
        self.u2, self.u1 = block(128 + 64, 64), block(64 + 32, 32)
        self.out = nn.Conv2d(32, 1, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        c = self.d3(F.max_pool2d(b, 2))
        u = self.u2(torch.cat([F.interpolate(c, scale_factor=2), b], 1))
        u = self.u1(torch.cat([F.interpolate(u, scale_factor=2), a], 1))
        return torch.sigmoid(self.out(u))


def dice_loss(pred, target):
    inter = (pred * target).sum(dim=(1, 2, 3))
    union = pred.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
    return (1 - 2 * inter / union).mean()  # expect: confirmed div, possible mean


images = torch.rand(64, 1, 64, 64)
masks = (images > 0.7).float()
model = UNet()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _epoch in range(2):
    for i in range(0, 64, 16):
        t = time.time()
        pred = model(images[i : i + 16])
        loss = dice_loss(pred, masks[i : i + 16])
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {i // 16} loss {loss.item():.4f} {time.time() - t:.2f} s")
