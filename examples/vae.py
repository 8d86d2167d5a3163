"""A variational autoencoder on synthetic binarised 28x28 images.

    python examples/vae.py

Reparameterisation with std = exp(0.5 * logvar), a Bernoulli reconstruction
term written out by hand on the decoder's sigmoid output, and the closed-form
KL to N(0, I). The half-guarded reconstruction loss is what people write after
their first NaN: one log got an eps, the other did not.
"""

import torch
import torch.nn as nn

SIDE = 28


class VAE(nn.Module):
    def __init__(self, n_in=SIDE * SIDE, hidden=256, latent=16):
        super().__init__()
        self.enc = nn.Linear(n_in, hidden)
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec1 = nn.Linear(latent, hidden)
        self.dec2 = nn.Linear(hidden, n_in)

    def encode(self, x):
        h = torch.relu(self.enc(x.flatten(1)))
        return self.mu(h), self.logvar(h)

    def reparameterize(self, mu, logvar):
        # exp overflows once the encoder emits logvar > ~177 (0.5 * logvar > ln(FLT_MAX)).
        std = torch.exp(0.5 * logvar)  # expect: confirmed exp
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return self.dec2(torch.relu(self.dec1(z)))  # logits; the loss applies the sigmoid

    def forward(self, x):
        mu, logvar = self.encode(x)
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def vae_loss(recon_logits, x, mu, logvar):
    x = x.flatten(1)
    recon = torch.sigmoid(recon_logits)
    # sigmoid rounds to exactly 0 for decoder logits below ~-88 (float32): log(0) = -inf.
    # The second log was guarded: 1 - recon lies in [0, 1], so + 1e-7 keeps it positive.
    bce = -(x * torch.log(recon) + (1 - x) * torch.log(1 - recon + 1e-7)).sum(1)  # expect: confirmed log, safe log
    # logvar.exp() overflows for logvar > ~88.7, long before the reparameterisation does.
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1)  # expect: confirmed exp
    return (bce + kld).mean()


def synthetic_batch(n, generator):
    """Random strokes: each image is a few bright horizontal or vertical bars."""
    x = torch.zeros(n, 1, SIDE, SIDE)
    pos = torch.randint(2, SIDE - 2, (n, 3), generator=generator)
    for i in range(n):
        for p in pos[i].tolist():
            if p % 2:
                x[i, 0, p, 4:24] = 1.0
            else:
                x[i, 0, 4:24, p] = 1.0
    return x


def train(steps=10, batch=32, lr=1e-3, seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(steps):
        x = synthetic_batch(batch, g)
        recon, mu, logvar = model(x)
        loss = vae_loss(recon, x, mu, logvar)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.2f}")
    return model


if __name__ == "__main__":
    train()
