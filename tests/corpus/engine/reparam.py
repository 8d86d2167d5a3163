"""A VAE encoder whose forward draws its own noise (the reparameterisation trick).

Nothing calls it: only a probe of the module reaches it, and the noise it draws with
``torch.randn_like`` is part of any witness, so a replay must draw the same noise.
"""

import torch
import torch.nn as nn


class Reparam(nn.Module):
    def __init__(self, d=12, z=3):
        super().__init__()
        self.enc = nn.Linear(d, 2 * z)
        self.dec = nn.Linear(z, d)

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        recon = torch.sigmoid(self.dec(z))
        return -(x * torch.log(recon)).sum(-1).mean()  # bug: the sigmoid saturates to 0
