"""A mixture density network for multi-modal 1-D regression, with an explicit GRIST entry.

    grist-lsp --check tests/corpus/programs/entry_mdn.py --entry tests/corpus/programs/entry_mdn.py:grist_entry

The hand-written mixture likelihood is the textbook one: a component density
that underflows for every component makes the log of the mixture -inf.
"""

import math

import torch
import torch.nn as nn

SQRT_2PI = math.sqrt(2 * math.pi)  # expect: safe sqrt


class MDN(nn.Module):
    def __init__(self, n_in=1, hidden=32, k=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh())
        self.logits = nn.Linear(hidden, k)
        self.mu = nn.Linear(hidden, k)
        self.log_sigma = nn.Linear(hidden, k)

    def forward(self, x):
        h = self.body(x)
        # log_sigma is unconstrained: exp overflows above ~88.7 and rounds to 0 below ~-103.
        # h comes out of a tanh, so no input gets there: only head weights that drifted
        # far in training do (a real MDN failure, but beyond a bounded weight move).
        sigma = torch.exp(self.log_sigma(h))  # expect: possible exp
        return torch.softmax(self.logits(h), -1), self.mu(h), sigma

    def nll(self, x, y):
        pi, mu, sigma = self(x)
        # sigma is exactly 0 only once log_sigma < ~-103: the same drifted weights as above.
        z = (y - mu) / sigma  # expect: possible div
        density = torch.exp(-0.5 * z ** 2) / (sigma * SQRT_2PI)  # expect: possible div, safe exp
        # Far from every component, each density underflows to 0.
        # NaN only for an empty batch.
        return -torch.log((pi * density).sum(-1)).mean()  # expect: confirmed log


def grist_entry():
    torch.manual_seed(0)
    model = MDN()
    x = torch.linspace(-1, 1, 16)[:, None]
    y = torch.sin(3 * x) + 0.1 * torch.randn(16, 1)
    return model.nll, (x, y)


if __name__ == "__main__":
    fn, args = grist_entry()
    print(fn(*args).item())
