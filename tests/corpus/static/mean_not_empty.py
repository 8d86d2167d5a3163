"""Means over whole tensors, along dims, of literal slices and of rows picked by
number: no data-dependent selection can leave them empty, so none is a site
(only masks, nonzero/where indices, computed slice bounds and lists built at run
time make a mean of nothing: see mean_bug.py)."""
import torch
import torch.nn.functional as F


def statistics(x, y, i: int):
    a = x.mean()
    b = torch.mean(x, dim=0)
    c = (x - y).pow(2).mean(-1)
    d = x[:, 1:].mean()
    e = x[i].mean() + x[0].nanmean()
    f = torch.stack([x, y]).mean(0)
    g = x[torch.arange(3)].mean()
    h = (x.argmax(-1) == y).float().mean()
    n = 4
    k = x[:n].mean()
    rows = [x[j].mean() for j in range(3)]
    m = F.relu(x).mean(dim=(0, 2))
    return a, b, c, d, e, f, g, h, k, rows, m
