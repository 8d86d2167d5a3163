"""Arguments flow into private helpers; returns flow back to callers."""
import torch


def _safe_log(v):
    return torch.log(v)  # expect: torch.log@11 safe


def _denominator(x: torch.Tensor):
    return x.norm() + 1e-8


def entropy(p):
    return -(p * torch.log(p)).sum()  # expect: torch.log@17 possible


def forward(x: torch.Tensor, p):
    a = _safe_log(p.clamp_min(1e-6))
    b = x / _denominator(x)  # expect: torch.Tensor.__truediv__@8 safe
    return a + b + entropy(p)


def _callback_log(v):
    return torch.log(v)  # expect: torch.log@11 possible


def _wrapped_log(v):
    return torch.log(v)  # expect: torch.log@11 possible


@torch.no_grad()
def _decorated_log(v):
    return torch.log(v)  # expect: torch.log@11 possible


def register(hooks, p):
    _callback_log(p.clamp_min(1e-6))
    hooks.append(_callback_log)  # passed on: other callers may pass anything
    wrapped = torch.no_grad()(_wrapped_log)
    return wrapped(p), _decorated_log(p.clamp_min(1e-6))
