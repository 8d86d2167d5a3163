"""Graph attention: scores masked to the neighbourhood."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GATLayer(nn.Module):
    def __init__(self, in_dim, out_dim, alpha=0.2):
        super().__init__()
        self.W = nn.Linear(in_dim, out_dim, bias=False)
        self.a = nn.Linear(2 * out_dim, 1, bias=False)
        self.alpha = alpha

    def forward(self, h, adj):
        Wh = self.W(h)
        N = Wh.size(0)
        pairs = torch.cat([Wh.repeat_interleave(N, 0), Wh.repeat(N, 1)], dim=1).view(N, N, -1)
        e = F.leaky_relu(self.a(pairs).squeeze(-1), self.alpha)
        att = torch.where(adj > 0, e, torch.full_like(e, float("-inf")))
        att = F.softmax(att, dim=1)  # expect: possible softmax
        return att @ Wh


def mean_aggregate(x, adj):
    deg = adj.sum(1, keepdim=True)
    return (adj @ x) / deg  # expect: possible div
