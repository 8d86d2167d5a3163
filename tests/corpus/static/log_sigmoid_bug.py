"""Binary cross-entropy by hand through an alias and a method."""
import torch as th


def bce(z, y):
    p = th.sigmoid(z)
    return -(y * p.log() + (1 - y) * th.log(1 - p))  # expect: torch.Tensor.log@17 possible; torch.log@37 possible
