"""Every import spelling resolves to the same op."""
import torch as T
import torch.nn.functional as F
from torch import log as ln
from torch.nn import functional as G


def forms(x):
    a = ln(x)  # expect: torch.log@8 possible
    b = T.special.log1p(x)  # expect: torch.special.log1p@8 possible
    c = F.softplus(x)
    d = T.log(G.softplus(x) + 1e-6)  # expect: torch.log@8 safe
    e = T.Tensor.sqrt(x)  # expect: torch.Tensor.sqrt@8 possible
    return a, b, c, d, e


def assigned_aliases(x):
    nnf = T.nn.functional
    log = T.log
    a = log(nnf.softplus(x) + 1e-6)  # expect: torch.log@8 safe
    b = log(x)  # expect: torch.log@8 possible
    return a, b
