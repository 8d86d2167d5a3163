"""Gaussian log-likelihoods with a learned scale."""
import math

import torch

LOG_2PI = math.log(2 * math.pi)


def gaussian_nll(x, mu, log_sigma):
    sigma = log_sigma.exp()  # expect: possible exp
    return 0.5 * (((x - mu) / sigma) ** 2 + LOG_2PI) + log_sigma  # expect: possible div


def gaussian_nll_softplus(x, mu, raw_scale, min_scale=1e-3):
    scale = torch.nn.functional.softplus(raw_scale) + min_scale
    return 0.5 * ((x - mu) / scale) ** 2 + torch.log(scale) + 0.5 * LOG_2PI  # expect: safe div, safe log


def kl_normal(mu_q, logvar_q, mu_p, logvar_p):
    return 0.5 * (logvar_p - logvar_q + (logvar_q.exp() + (mu_q - mu_p) ** 2) / logvar_p.exp() - 1)  # expect: possible exp, possible div, possible exp
