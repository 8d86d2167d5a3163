"""PPO clipped surrogate loss with per-batch advantage normalisation."""

import torch


def normalize_advantages(adv):
    # A rollout of one step: std with Bessel's correction is NaN.
    # A rollout with identical rewards: std is 0 and the division is 0 / 0.
    return (adv - adv.mean()) / adv.std()  # expect: confirmed div, confirmed var


def normalize_advantages_eps(adv):
    # The population std is defined for one element and >= 0, so + 1e-8 > 0.
    return (adv - adv.mean()) / (adv.std(correction=0) + 1e-8)  # expect: safe div, safe var


def ppo_loss(logp_new, logp_old, adv, clip=0.2):
    # The log-ratio is unbounded: a policy that moved far overflows exp.
    ratio = torch.exp(logp_new - logp_old)  # expect: confirmed exp
    surr1 = ratio * adv
    surr2 = ratio.clamp(1 - clip, 1 + clip) * adv
    return -torch.min(surr1, surr2).mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    logp_old = torch.log_softmax(torch.randn(64, 4), -1)[:, 0]
    logp_new = logp_old + 0.05 * torch.randn(64)
    rewards = torch.randn(64)
    print(ppo_loss(logp_new, logp_old, normalize_advantages(rewards)).item())
    print(ppo_loss(logp_new, logp_old, normalize_advantages_eps(rewards)).item())
