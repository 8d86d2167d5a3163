"""One buggy function per unsafe-op kind (and per spelling: function, method, in-place, operator).

Each function has an input in BAD_INPUTS that drives its op to NaN/INF; the fix tests rewrite the
op and check the same input then gives finite values.
"""

import torch
import torch.nn.functional as F


def log_plain(x):
    return torch.log(x)


def log_method(x):
    return x.log()


def log_inplace(x):
    y = x.clone()
    y.log_()
    return y


def log_of_softmax(x):
    return torch.log(F.softmax(x, dim=-1))


def log_of_sigmoid(x):
    return torch.log(torch.sigmoid(x))


def log_of_sum_exp(x):
    return torch.log(torch.exp(x).sum(dim=-1))


def log1p_method(x):
    return x.log1p()


def sqrt_of_difference(x, y):
    return torch.sqrt(x - y)


def rsqrt_plain(x):
    return torch.rsqrt(x)


def div_signed(a: torch.Tensor, b):
    return a / b


def div_by_norm(a, b):
    return a / b.abs().sum()


def div_augmented(a, b):
    a = a.clone()
    a /= b
    return a


def div_reflected(x: torch.Tensor):
    return 1 / x


def reciprocal_method(x):
    return x.reciprocal()


def exp_plain(x):
    return torch.exp(x)


def exp_manual_softmax(x):
    return torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)


def pow_fractional(x: torch.Tensor):
    return x ** 0.5


def pow_negative(x: torch.Tensor):
    return x ** -1


def pow_function(x):
    return torch.pow(x, 1.5)


def acos_plain(x):
    return torch.acos(x)


def asin_method(x):
    return x.asin()


def atanh_method(x):
    return x.atanh()


def acosh_plain(x):
    return torch.acosh(x)


def lgamma_plain(x):
    return torch.lgamma(x)


def var_single(x):
    return x.var()


def std_function(x):
    return torch.std(x, dim=0)


def mean_of_selection(x, mask):
    return x[mask].mean()


def logit_plain(x):
    return torch.logit(x)


def softmax_masked(scores, keep):
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def masked_entropy(scores, keep):
    logp = F.log_softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def logdet_plain(a):
    return torch.logdet(a)


def cholesky_plain(a):
    return torch.linalg.cholesky(a)


def inverse_plain(a):
    return torch.linalg.inv(a)


def eigenvector_gradient(a):
    a = a.detach().requires_grad_(True)
    _, vectors = torch.linalg.eigh(a)
    (grad,) = torch.autograd.grad(vectors.sum(), a)
    return grad


BAD_INPUTS = {
    "log_plain": ([0.0, 1.0],),
    "log_method": ([0.0, 1.0],),
    "log_inplace": ([0.0, 1.0],),
    "log_of_softmax": ([[0.0, -200.0]],),
    "log_of_sigmoid": ([-200.0],),
    "log_of_sum_exp": ([[-200.0, -300.0]],),
    "log1p_method": ([-1.0],),
    "sqrt_of_difference": ([0.0], [1.0]),
    "rsqrt_plain": ([0.0],),
    "div_signed": ([1.0, 1.0], [0.0, -2.0]),
    "div_by_norm": ([1.0], [0.0]),
    "div_augmented": ([1.0], [0.0]),
    "div_reflected": ([0.0],),
    "reciprocal_method": ([0.0, -4.0],),
    "exp_plain": ([100.0],),
    "exp_manual_softmax": ([[100.0, 0.0]],),
    "pow_fractional": ([-1.0],),
    "pow_negative": ([0.0],),
    "pow_function": ([-2.0],),
    "acos_plain": ([1.5],),
    "asin_method": ([-1.5],),
    "atanh_method": ([1.0],),
    "acosh_plain": ([0.5],),
    "lgamma_plain": ([0.0],),
    "var_single": ([3.0],),
    "std_function": ([[3.0, 4.0]],),
    "mean_of_selection": ([1.0, 2.0], [False, False]),
    "logit_plain": ([1.0],),
    "softmax_masked": ([[1.0, 2.0]], [[False, False]]),
    "masked_entropy": ([[1.0, 2.0]], [[True, False]]),
    "logdet_plain": ([[1.0, 1.0], [1.0, 1.0]],),
    "cholesky_plain": ([[1.0, 1.0], [1.0, 1.0]],),
    "inverse_plain": ([[1.0, 1.0], [1.0, 1.0]],),
    "eigenvector_gradient": ([[1.0, 0.0], [0.0, 1.0]],),
}
