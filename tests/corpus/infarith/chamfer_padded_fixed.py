"""A nearest-neighbour (Chamfer-style) loss over padded point clouds: a point with no other
valid point (a cloud of one) counts 0, and padded points get weight 0 in the average."""

import torch

torch.manual_seed(0)
points = torch.randn(3, 8, 2, requires_grad=True)
counts = torch.tensor([8, 5, 1])

valid = torch.arange(8)[None, :] < counts[:, None]
dist = torch.cdist(points, points)
blocked = torch.eye(8, dtype=torch.bool)[None] | ~(valid[:, :, None] & valid[:, None, :])
nearest = dist.masked_fill(blocked, float("inf")).amin(-1)
nearest = torch.nan_to_num(nearest, nan=torch.nan, posinf=0.0)
loss = (nearest * valid.float()).sum() / valid.sum()  # expect: possible div, safe inf_arith
loss.backward()
print("loss", float(loss))
