"""Running mean/std of observations (Welford), as RL libraries keep them."""
import numpy as np


class RunningMeanStd:
    def __init__(self, shape=(), epsilon=1e-4):
        self.mean = np.zeros(shape, "float64")
        self.var = np.ones(shape, "float64")
        self.count = epsilon

    def update(self, x):
        batch_mean = np.mean(x, axis=0)
        batch_var = np.var(x, axis=0)
        batch_count = x.shape[0]
        delta = batch_mean - self.mean
        tot = self.count + batch_count
        self.mean = self.mean + delta * batch_count / tot  # expect: unproven div
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / tot  # expect: unproven div
        self.var = m2 / tot  # expect: unproven div
        self.count = tot


def normalize_obs(obs, rms, clip=10.0):
    return np.clip((obs - rms.mean) / np.sqrt(rms.var + 1e-8), -clip, clip)  # expect: unproven div, unproven sqrt
