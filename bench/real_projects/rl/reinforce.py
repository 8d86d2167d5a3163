"""REINFORCE on a toy environment (no gym needed): returns normalised per episode."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="REINFORCE")
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--episodes", type=int, default=3)
parser.add_argument("--log-interval", type=int, default=1)
args = parser.parse_args()
eps = np.finfo(np.float32).eps.item()


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 32)
        self.affine2 = nn.Linear(32, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        return F.softmax(self.affine2(F.relu(self.affine1(x))), dim=1)


def finish_episode(policy, optimizer):
    R = 0
    returns = []
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)  # expect: possible var, safe div
    loss = torch.cat([-lp * R for lp, R in zip(policy.saved_log_probs, returns)]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del policy.rewards[:], policy.saved_log_probs[:]


def main():
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    running = 10.0
    for episode in range(1, args.episodes + 1):
        length = 1 + episode % 3  # expect: safe div
        for _ in range(length):
            probs = policy(torch.randn(1, 4))
            m = torch.distributions.Categorical(probs)
            action = m.sample()
            policy.saved_log_probs.append(m.log_prob(action))
            policy.rewards.append(1.0)
        running = 0.05 * length + (1 - 0.05) * running
        finish_episode(policy, optimizer)
        if episode % args.log_interval == 0:  # expect: safe div
            print(f"episode {episode}\tlast length {length}\taverage {running:.2f}")


if __name__ == "__main__":
    main()
