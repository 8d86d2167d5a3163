"""Exponential moving averages with bias correction, and a warmup schedule."""
import math


class EMA:
    def __init__(self, beta=0.999):
        self.beta = beta
        self.value = 0.0
        self.step = 0

    def update(self, x):
        self.step += 1
        self.value = self.beta * self.value + (1 - self.beta) * x
        return self.value / (1 - self.beta ** self.step)  # expect: unproven div, safe pow


def warmup_cosine(step, warmup, total):
    if step < warmup:
        return step / warmup  # expect: safe div
    progress = (step - warmup) / max(1, total - warmup)  # expect: safe div
    return 0.5 * (1 + math.cos(math.pi * progress))


def inverse_sqrt(step, warmup=4000, d_model=512):
    step = max(step, 1)
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)  # expect: safe pow, safe pow, safe pow
