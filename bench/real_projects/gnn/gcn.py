"""Graph convolution: symmetric normalisation of an adjacency matrix."""
import torch
import torch.nn as nn


def normalize_adjacency(adj):
    deg = adj.sum(dim=1)
    d_inv_sqrt = deg.pow(-0.5)  # expect: possible pow
    return d_inv_sqrt[:, None] * adj * d_inv_sqrt[None, :]


def normalize_with_self_loops(adj):
    a_hat = adj.abs() + torch.eye(adj.size(0))
    deg = a_hat.sum(dim=1)
    return a_hat / deg[:, None]  # expect: unproven div


def degree_scale(edge_index, num_nodes):
    deg = torch.zeros(num_nodes).scatter_add_(0, edge_index[0], torch.ones(edge_index.size(1)))
    return 1.0 / torch.sqrt(deg)  # expect: possible div, possible sqrt


class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim)

    def forward(self, x, adj):
        return torch.relu(normalize_adjacency(adj) @ self.lin(x))
