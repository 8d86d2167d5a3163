"""Means of selections that can be empty: each is NaN when the selection keeps nothing."""
import torch
import torch.nn as nn


def masked_mean(x, mask):
    a = x[mask].mean()  # expect: torch.Tensor.mean@8 possible
    b = torch.mean(x[x > 0])  # expect: torch.mean@8 possible
    c = x[~mask].nanmean()  # expect: torch.Tensor.nanmean@8 possible
    return a, b, c


def selected(x, y, labels):
    pos = labels == 1
    a = (x[pos] - y[pos]).abs().mean()  # expect: torch.Tensor.mean@8 possible
    b = torch.masked_select(x, x.isfinite()).mean()  # expect: torch.Tensor.mean@8 possible
    idx = torch.nonzero(labels).squeeze(1)
    c = x[idx].mean(dim=0)  # expect: torch.Tensor.mean@8 possible
    rows, cols = torch.where(labels > 0)
    d = torch.nanmean(x[rows, cols])  # expect: torch.nanmean@8 possible
    e = x.masked_select(labels.bool()).mean()  # expect: torch.Tensor.mean@8 possible
    f = x[labels.ne(0) & y.isfinite()].mean()  # expect: torch.Tensor.mean@8 possible
    return a, b, c, d, e, f


def sliced(x, n):
    return x[:n].mean(0)  # expect: torch.Tensor.mean@11 possible


def _average(t):
    return t.mean()  # expect: torch.Tensor.mean@11 possible


def through_a_helper(x):
    return _average(x[x.abs() < 3.0])


def collected(batches, threshold):
    kept = []
    for b in batches:
        if b.max() > threshold:
            kept.append(b)
    scores = torch.tensor([s for s in threshold.tolist() if s > 0])
    return torch.cat(kept).mean(), scores.mean()  # expect: torch.Tensor.mean@11 possible; torch.Tensor.mean@35 possible


class MaskedPool(nn.Module):
    def forward(self, x, lengths):
        self.valid = torch.arange(x.shape[1])[None, :] < lengths[:, None]
        return self.pooled(x)

    def pooled(self, x):
        return x[self.valid].mean()  # expect: torch.Tensor.mean@15 possible
