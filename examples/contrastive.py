"""SimCLR-style contrastive learning with a hand-written NT-Xent (InfoNCE) loss.

    python examples/contrastive.py

Two augmented views of each sample go through an encoder and a ReLU projection
head; the loss pulls the two views together against the rest of the batch.
The cosine similarity is written out by hand and the temperature is learned,
as in CLIP, but without CLIP's clamp on it.
"""

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, n_in=64, hidden=128, out=32):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        # The projection head ends in a ReLU: a sample can map to the all-zero vector.
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, out), nn.ReLU())

    def forward(self, x):
        return self.head(self.backbone(x))


class NTXent(nn.Module):
    def __init__(self, init_tau=0.1):
        super().__init__()
        self.tau = nn.Parameter(torch.tensor(init_tau))

    def forward(self, z1, z2):
        z = torch.cat([z1, z2], dim=0)
        n = z1.shape[0]
        norms = z.norm(dim=1)
        # An all-zero embedding (dead ReLU head) has norm 0: 0 / 0 in its row and column.
        sim = z @ z.T / (norms[:, None] * norms[None, :])  # expect: confirmed div
        # tau is learned and nothing keeps it away from 0.
        # Once it is below ~0.011, sim / tau exceeds ln(FLT_MAX) and exp overflows.
        logits = torch.exp(sim / self.tau)  # expect: confirmed div, confirmed exp
        mask = ~torch.eye(2 * n, dtype=torch.bool)
        denom = (logits * mask).sum(dim=1)
        pos = torch.cat([logits.diagonal(n), logits.diagonal(-n)])
        # A learned tau can also cross 0. Just below it every exp(sim / tau) of the
        # non-negative (ReLU) cosines underflows: denom is 0 (0 / 0), and a positive
        # whose share alone underflows gives log(0) = -inf.
        loss = -torch.log(pos / denom)  # expect: confirmed log, confirmed div
        return loss.mean()


def alignment(z1, z2):
    """Monitoring metric: mean cosine of the positive pairs, with a guarded denominator."""
    num = (z1 * z2).sum(1)
    den = (z1.norm(dim=1) * z2.norm(dim=1)).clamp_min(1e-8)
    return (num / den).mean()  # expect: safe div


def augment(x, generator):
    noise = 0.1 * torch.randn(x.shape, generator=generator)
    keep = (torch.rand(x.shape, generator=generator) > 0.1).float()
    return (x + noise) * keep


def main(steps=10, n=32, seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    data = torch.randn(256, 64, generator=g)
    enc, crit = Encoder(), NTXent()
    opt = torch.optim.Adam(list(enc.parameters()) + list(crit.parameters()), lr=1e-3)
    for step in range(steps):
        idx = torch.randint(0, data.shape[0], (n,), generator=g)
        x = data[idx]
        z1, z2 = enc(augment(x, g)), enc(augment(x, g))
        loss = crit(z1, z2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}  tau {crit.tau.item():.4f}  align {alignment(z1, z2).item():.3f}")


if __name__ == "__main__":
    main()
