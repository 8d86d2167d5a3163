"""A VAE: the reparameterisation and KL terms exponentiate an unbounded logvar."""
import torch
import torch.nn as nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 4)

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        std = torch.exp(0.5 * logvar)  # expect: torch.exp@14 possible
        z = mu + std * torch.randn_like(std)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())  # expect: torch.Tensor.exp@55 possible
        return z, kl
