"""A VAE on images in [0, 1]: the encoder's log-variance is an unbounded linear output, and
exp(0.5 * logvar) overflows once the encoder's weights have grown, with images as they are."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.mu = nn.Linear(32, 8)
        self.logvar = nn.Linear(32, 8)
        self.dec = nn.Linear(8, 64)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        mu, logvar = self.mu(h), self.logvar(h)
        std = torch.exp(0.5 * logvar)  # expect: confirmed exp
        z = mu + std * torch.randn_like(std)
        return torch.sigmoid(self.dec(z)), mu, logvar


images = torch.rand(128, 64)
model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for i in range(0, 128, 32):
        x = images[i : i + 32]
        recon, mu, logvar = model(x)
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.clamp(max=80).exp())
        loss = F.binary_cross_entropy(recon, x, reduction="sum") + kld
        opt.zero_grad()
        loss.backward()
        opt.step()
print(f"final loss {loss.item():.4f}")
