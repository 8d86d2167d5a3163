"""NaN made upstream must be blamed upstream, never on the op it flows into."""
import torch


def stable_score(x):
    y = torch.log(x)  # bug: x <= 0
    z = y.clamp(-20.0, 20.0)  # NaN passes through clamp
    return torch.exp(z)  # safe for finite operands: exponent <= 20
