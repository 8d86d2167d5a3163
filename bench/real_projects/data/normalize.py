"""Feature scaling of tabular data with numpy."""
import numpy as np


def zscore(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)  # expect: possible div


def zscore_safe(X, eps=1e-8):
    return (X - X.mean(axis=0)) / (X.std(axis=0) + eps)  # expect: safe div


def minmax(X):
    lo, hi = X.min(axis=0), X.max(axis=0)
    return (X - lo) / (hi - lo)  # expect: possible div


def train_val_split(n, val_fraction=0.1, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(n)
    n_val = int(n * val_fraction)
    print(f"{n_val} of {n} for validation ({100 * n_val / n:.1f}%)")  # expect: safe div
    return idx[n_val:], idx[:n_val]


def log_transform(counts):
    return np.log(counts)  # expect: possible log


def log1p_transform(counts):
    return np.log1p(np.abs(counts))  # expect: safe log1p
