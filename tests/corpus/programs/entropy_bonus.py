"""Actor-critic policy loss with an entropy bonus, written with probabilities."""

import torch
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self, obs_dim=8, n_actions=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh())
        self.pi = nn.Linear(64, n_actions)
        self.v = nn.Linear(64, 1)

    def forward(self, obs):
        h = self.body(obs)
        return torch.softmax(self.pi(h), dim=-1), self.v(h).squeeze(-1)


def a2c_loss(policy, obs, actions, returns, beta=0.01):
    probs, values = policy(obs)
    # A saturated policy gives an action probability of exactly 0.
    logp = torch.log(probs.gather(1, actions[:, None]).squeeze(1))  # expect: confirmed log
    entropy = -(probs * probs.log()).sum(-1)  # expect: confirmed log
    adv = (returns - values).detach()
    # Empty rollout only.
    return -(logp * adv).mean() + 0.5 * (returns - values).pow(2).mean() - beta * entropy.mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = Policy()
    obs = torch.randn(32, 8)
    actions = torch.randint(0, 4, (32,))
    returns = torch.randn(32)
    print(a2c_loss(policy, obs, actions, returns).item())
