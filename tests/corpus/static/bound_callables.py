"""Calls of attributes and names bound to modules, objects and functions: a method's
name (var, norm, exp, std) says nothing about what calling them returns."""
import torch
import torch.nn as nn


def centered(x):
    return x - 0.5


class Scale(nn.Module):
    def forward(self, x):
        return x * 2.0


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.var = nn.Linear(8, 4)
        self.norm = nn.LayerNorm(4)
        self.exp = Scale()
        self.std = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
        self.abs = centered

    def forward(self, h):
        a = torch.sqrt(self.var(h) + 1e-5)  # expect: torch.sqrt@12 possible
        b = torch.log(self.norm(a))  # expect: torch.log@12 possible
        c = torch.log(self.norm(a) + 1e-6)  # expect: torch.log@12 possible
        d = torch.log1p(self.exp(h))  # expect: torch.log1p@12 possible
        e = torch.rsqrt(self.std(h) + 1e-5)  # expect: torch.rsqrt@12 possible
        f = torch.log(self.abs(h) + 1e-6)  # expect: torch.log@12 possible
        return a, b, c, d, e, f

    def twins(self, h):
        # the genuine tensor methods keep their facts
        a = torch.sqrt(h.var(dim=0) + 1e-5)  # expect: torch.sqrt@12 safe; torch.Tensor.var@23 possible
        b = torch.log(h.norm(dim=-1) + 1e-6)  # expect: torch.log@12 safe
        c = torch.log1p(h.exp())  # expect: torch.log1p@12 safe; torch.Tensor.exp@24 possible
        d = torch.rsqrt(h.std() + 1e-5)  # expect: torch.rsqrt@12 safe; torch.Tensor.std@24 possible
        e = torch.log(h.abs() + 1e-6)  # expect: torch.log@12 safe
        return a, b, c, d, e


def outside(h):
    head = Head()
    norm = nn.LayerNorm(4)
    a = torch.sqrt(head.var(h) + 1e-5)  # expect: torch.sqrt@8 possible
    b = torch.log(norm(h))  # expect: torch.log@8 possible
    c = torch.log(head.norm.weight.abs() + 1e-6)  # expect: torch.log@8 safe
    return a, b, c
