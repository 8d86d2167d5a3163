"""Actor-critic with a value head; advantages normalised over the batch."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.body = nn.Linear(obs_dim, hidden)
        self.pi = nn.Linear(hidden, n_actions)
        self.v = nn.Linear(hidden, 1)

    def forward(self, x):
        h = F.relu(self.body(x))
        return F.softmax(self.pi(h), dim=-1), self.v(h)


def discounted(rewards, gamma=0.99):
    out, R = [], 0.0
    for r in reversed(rewards):
        R = r + gamma * R
        out.append(R)
    return out[::-1]


def normalise_advantages(adv, eps=1e-8):
    return (adv - adv.mean()) / (adv.std() + eps)  # expect: possible var, safe div


def update(model, optimizer, states, actions, rewards):
    probs, values = model(states)
    returns = torch.tensor(discounted(rewards))
    adv = normalise_advantages(returns - values.squeeze(-1).detach())
    logp = torch.log(probs.gather(1, actions[:, None]).squeeze(1))  # expect: possible log
    loss = -(logp * adv).mean() + F.smooth_l1_loss(values.squeeze(-1), returns)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
