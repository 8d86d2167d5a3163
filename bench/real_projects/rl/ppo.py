"""PPO's clipped objective and generalised advantage estimation."""
import torch


def gae(rewards, values, dones, gamma=0.99, lam=0.95):
    T = rewards.size(0)
    adv = torch.zeros_like(rewards)
    last = 0.0
    for t in reversed(range(T)):
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * values[t + 1] * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv


def ppo_loss(new_logp, old_logp, adv, clip=0.2):
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # expect: possible var, safe div
    ratio = torch.exp(new_logp - old_logp)  # expect: possible exp
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1 - clip, 1 + clip) * adv
    return -torch.min(surr1, surr2).mean()


def explained_variance(pred, target):
    var_y = target.var()  # expect: possible var
    return 1 - (target - pred).var() / var_y  # expect: possible var, possible div
