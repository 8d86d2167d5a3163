"""Negative-binomial likelihood for over-dispersed counts (scRNA-seq style decoder).

mean = exp(eta), dispersion r = softplus(raw): both can round to exactly 0 for
very negative network outputs, and lgamma has a pole at 0.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class CountDecoder(nn.Module):
    def __init__(self, latent=8, n_genes=20):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(latent, 32), nn.ReLU())
        self.eta = nn.Linear(32, n_genes)
        self.raw_r = nn.Linear(32, n_genes)

    def forward(self, z):
        h = self.hidden(z)
        # exp overflows for eta > ~88.7.
        mu = torch.exp(self.eta(h))  # expect: confirmed exp
        r = F.softplus(self.raw_r(h))
        return mu, r


def nb_log_likelihood(counts, mu, r):
    # With a zero count and r underflowed to 0, the first two are at the pole.
    ll = torch.lgamma(counts + r)  # expect: confirmed lgamma
    ll = ll - torch.lgamma(r)  # expect: confirmed lgamma
    # Counts are non-negative in real data; only a negative count reaches this pole.
    ll = ll - torch.lgamma(counts + 1)  # expect: possible lgamma
    log_r_mu = torch.log(r + mu)  # expect: confirmed log
    ll = ll + r * (torch.log(r) - log_r_mu)  # expect: confirmed log
    ll = ll + counts * (torch.log(mu) - log_r_mu)  # expect: confirmed log
    return ll.sum(-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    dec = CountDecoder()
    z = torch.randn(4, 8)
    mu, r = dec(z)
    counts = torch.poisson(torch.full((4, 20), 2.0))
    print(nb_log_likelihood(counts, mu, r))
