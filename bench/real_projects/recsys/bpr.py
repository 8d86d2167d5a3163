"""Matrix factorisation with the BPR loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MF(nn.Module):
    def __init__(self, n_users, n_items, dim=16):
        super().__init__()
        self.u = nn.Embedding(n_users, dim)
        self.i = nn.Embedding(n_items, dim)

    def score(self, users, items):
        return (self.u(users) * self.i(items)).sum(-1)


def bpr_loss_naive(pos, neg):
    return -torch.log(torch.sigmoid(pos - neg)).mean()  # expect: possible log


def bpr_loss(pos, neg):
    return -F.logsigmoid(pos - neg).mean()


def l2_reg(model, lam=1e-4):
    return lam * sum(p.pow(2).sum() for p in model.parameters())
