"""A nearest-neighbour (Chamfer-style) loss over padded point clouds: a point's distance to
itself and to padding is +inf, and padded points get weight 0 in the average."""

import torch

torch.manual_seed(0)
points = torch.randn(3, 8, 2, requires_grad=True)
counts = torch.tensor([8, 5, 1])

valid = torch.arange(8)[None, :] < counts[:, None]
dist = torch.cdist(points, points)
blocked = torch.eye(8, dtype=torch.bool)[None] | ~(valid[:, :, None] & valid[:, None, :])
nearest = dist.masked_fill(blocked, float("inf")).amin(-1)
loss = (nearest * valid.float()).sum() / valid.sum()  # expect: possible div, confirmed inf_arith
loss.backward()
print("loss", float(loss))
