"""A DDPM noise schedule."""
import math

import torch


def cosine_beta_schedule(timesteps, s=0.008):
    steps = timesteps + 1
    x = torch.linspace(0, timesteps, steps)
    alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2  # expect: safe div, safe div
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]  # expect: unproven div
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])  # expect: unproven div
    return torch.clip(betas, 0.0001, 0.9999)


class Schedule:
    def __init__(self, timesteps=100):
        self.betas = torch.linspace(1e-4, 0.02, timesteps)
        alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(alphas, dim=0)
        self.sqrt_recip = torch.sqrt(1.0 / self.alphas_cumprod)  # expect: unproven div, unproven sqrt
        self.log_var = torch.log(self.betas)  # expect: safe log
