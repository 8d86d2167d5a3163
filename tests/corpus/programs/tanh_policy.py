"""Squashed-Gaussian policy of Soft Actor-Critic, with a replay-buffer log-prob helper."""

import math

import torch
import torch.nn as nn

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)  # expect: safe log


class SquashedGaussianPolicy(nn.Module):
    def __init__(self, obs_dim=5, act_dim=2, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Linear(hidden, act_dim)

    def forward(self, obs):
        h = self.body(obs)
        mu = self.mu(h)
        # Clamped log-std: exp of a value <= 2 cannot overflow.
        std = torch.exp(self.log_std(h).clamp(-20, 2))  # expect: safe exp
        u = mu + std * torch.randn_like(mu)
        action = torch.tanh(u)
        normal_logp = (-0.5 * ((u - mu) / std) ** 2 - std.log() - LOG_SQRT_2PI).sum(-1)  # expect: safe div, safe log
        # tanh is in [-1, 1], so 1 - a^2 + 1e-6 >= 1e-6.
        logp = normal_logp - torch.log(1 - action.pow(2) + 1e-6).sum(-1)  # expect: safe log
        return action, logp


def replay_log_prob(policy, obs, action):
    """Log-probability of a stored action: invert the squashing first."""
    h = policy.body(obs)
    mu, std = policy.mu(h), torch.exp(policy.log_std(h).clamp(-20, 2))  # expect: safe exp
    # A stored action at the bound (tanh rounded to exactly +-1 above |u| ~ 9) gives atanh = inf.
    u = torch.atanh(action)  # expect: confirmed atanh
    normal_logp = (-0.5 * ((u - mu) / std) ** 2 - torch.log(std)).sum(-1)  # expect: safe div, safe log
    # Unguarded Jacobian term: 1 - a^2 is exactly 0 at the bound.
    return normal_logp - torch.log(1 - action.pow(2)).sum(-1)  # expect: confirmed log


if __name__ == "__main__":
    torch.manual_seed(0)
    pi = SquashedGaussianPolicy()
    obs = torch.randn(16, 5)
    action, logp = pi(obs)
    print(logp.shape, replay_log_prob(pi, obs, action.detach()).shape)
