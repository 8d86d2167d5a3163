"""Undiscounted returns-to-go of a long episode, with rewards kept in float16 and summed in float32."""

import torch

torch.manual_seed(0)
episode_rewards = [1.0 + 0.1 * (i % 7) for i in range(2000)]
rewards = torch.tensor(episode_rewards, dtype=torch.float16)
returns = rewards.flip(0).cumsum(0, dtype=torch.float32).flip(0)  # expect: safe overflow
baseline = returns.float().mean()
print("advantage", float((returns.float() - baseline).abs().max()))
