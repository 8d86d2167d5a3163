"""A DCGAN on 28x28 images with the hand-written GAN loss of the original paper."""

import torch
import torch.nn as nn

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self, nz=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(nz, 256, 7, 1, 0),
            nn.BatchNorm2d(256),
            nn.ReLU(),
            nn.ConvTranspose2d(256, 128, 4, 2, 1),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.ConvTranspose2d(128, 1, 4, 2, 1),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 128, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(128, 256, 4, 2, 1),
            nn.BatchNorm2d(256),
            nn.LeakyReLU(0.2),
            nn.Conv2d(256, 1, 7, 1, 0),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.net(x).view(-1)


G, D = Generator(), Discriminator()
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_images = torch.rand(256, 1, 28, 28) * 2 - 1

for epoch in range(5):
    for i in range(0, 256, 64):
        real = real_images[i : i + 64]
        z = torch.randn(real.size(0), 64, 1, 1)
        fake = G(z)
        d_loss = -(torch.log(D(real)) + torch.log(1 - D(fake.detach()))).mean()  # expect: confirmed log
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = -torch.log(D(fake)).mean()  # expect: confirmed log
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
    print(f"epoch {epoch} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")
