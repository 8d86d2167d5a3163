"""numpy preprocessing: log1p-style transforms and standardisation."""
import numpy as np


def preprocess(counts, x):
    a = np.log(np.abs(counts) + 1)  # expect: numpy.log@8 safe
    b = np.log(counts)  # expect: numpy.log@8 possible
    c = np.exp(-np.abs(x))  # expect: numpy.exp@8 safe
    z = (x - x.mean()) / np.sqrt(x.var() + 1e-8)  # expect: torch.Tensor.__truediv__@8 safe; numpy.sqrt@25 safe; torch.Tensor.var@33 possible
    return a, b, c, z
