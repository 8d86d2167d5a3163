"""The same actor-critic loss written with log-probabilities from log_softmax."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Policy(nn.Module):
    def __init__(self, obs_dim=8, n_actions=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh())
        self.pi = nn.Linear(64, n_actions)
        self.v = nn.Linear(64, 1)

    def forward(self, obs):
        h = self.body(obs)
        return F.log_softmax(self.pi(h), dim=-1), self.v(h).squeeze(-1)


def a2c_loss(policy, obs, actions, returns, beta=0.01):
    logp_all, values = policy(obs)
    logp = logp_all.gather(1, actions[:, None]).squeeze(1)
    # log_softmax is <= 0, so its exp lies in [0, 1].
    probs = logp_all.exp()  # expect: unproven exp
    entropy = -(probs * logp_all).sum(-1)
    adv = (returns - values).detach()
    return -(logp * adv).mean() + 0.5 * (returns - values).pow(2).mean() - beta * entropy.mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = Policy()
    obs = torch.randn(32, 8)
    print(a2c_loss(policy, obs, torch.randint(0, 4, (32,)), torch.randn(32)).item())
