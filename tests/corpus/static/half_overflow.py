"""float16 overflow of products and reductions: a result beyond 65504 is inf from finite operands.
Only ops whose operands may be float16 are sites; autocast runs sums in float32 and products in
float16; a cast to float32 first, or a result the ranges bound, is safe."""
import torch
import torch.nn as nn


def energy(wave):
    x = wave.half()
    e = x.pow(2).sum(-1)  # expect: torch.Tensor.pow@8 possible; torch.Tensor.sum@8 possible
    f = x.float().pow(2).sum(-1)
    g = x.sum(dtype=torch.float32)
    m = x.mean()
    return e, f, g, m


def gram(feats):
    h = feats.to(torch.float16)
    return h @ h.transpose(1, 2)  # expect: torch.Tensor.__matmul__@11 possible


def bounded(logits):
    p = torch.sigmoid(logits.half())
    return p * p, (p * 2).sum()  # expect: torch.Tensor.__mul__@11 safe; torch.Tensor.__mul__@19 safe; torch.Tensor.sum@18 possible


def made_half(n):
    w = torch.randn(n, n, dtype=torch.float16)
    v = torch.randn(n, dtype=torch.float32)
    return torch.mv(w, w[0]), torch.matmul(w, w), v @ v  # expect: torch.matmul@30 possible


def under_autocast(q, k):
    with torch.autocast("cuda"):
        s = q @ k.T  # expect: torch.Tensor.__matmul__@12 possible
        t = s.sum()
        u = s * s  # expect: torch.Tensor.__mul__@12 possible
    with torch.autocast("cpu"):
        b = q @ k.T
    return t, u, b


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return (x * x).sum()  # expect: torch.Tensor.__mul__@16 possible; torch.Tensor.sum@15 possible


net = Net().half()
