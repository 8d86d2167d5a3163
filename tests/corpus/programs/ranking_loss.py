"""RankNet pairwise loss for learning to rank, averaged over the ordered pairs of a query."""

import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self, n_features=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, docs):
        return self.net(docs).squeeze(-1)


def ranknet_loss(scores, relevance):
    """scores, relevance: (n_docs,) for one query."""
    diff = scores[:, None] - scores[None, :]
    better = (relevance[:, None] > relevance[None, :]).float()
    # P(i ranked above j) = sigmoid(s_i - s_j), which rounds to 0 when s_j leads by ~90.
    pair_loss = -torch.log(torch.sigmoid(diff))  # expect: confirmed log
    # A query whose documents are all equally relevant has no ordered pair: 0 / 0.
    return (pair_loss * better).sum() / better.sum()  # expect: confirmed div


def ranknet_loss_softplus(scores, relevance):
    diff = scores[:, None] - scores[None, :]
    better = (relevance[:, None] > relevance[None, :]).float()
    # log(1 + exp(-d)) by hand: exp overflows for d < -88.7.
    pair_loss = torch.log(1 + torch.exp(-diff))  # expect: confirmed exp, safe log
    return (pair_loss * better).sum() / better.sum().clamp(min=1.0)  # expect: safe div
