"""numpy and math logs on values."""
import math

import numpy as np


def stats(a, v, xs):
    n = len(xs)
    u = np.log(a)  # expect: numpy.log@8 possible
    w = math.log(v)  # expect: math.log@8 safe
    k = math.log(n + 1)  # expect: math.log@8 safe
    c = math.log(10000.0) / 64
    return u, w, k, c


def constants(x: np.ndarray):
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    c = math.sqrt(2 / math.pi)
    return x / math.sqrt(2 * math.pi) + half_log_2pi + c  # expect: torch.Tensor.__truediv__@11 safe
