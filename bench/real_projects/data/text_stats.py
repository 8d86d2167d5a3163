"""Corpus statistics in plain Python."""
import math
from collections import Counter


def unigram_probs(tokens):
    counts = Counter(tokens)
    total = sum(counts.values())
    return {w: c / total for w, c in counts.items()}  # expect: safe div


def entropy_bits(tokens):
    probs = unigram_probs(tokens)
    return -sum(p * math.log2(p) for p in probs.values())  # expect: safe log


def type_token_ratio(tokens):
    return len(set(tokens)) / len(tokens)  # expect: safe div


def chunks(seq, size):
    n = math.ceil(len(seq) / size)  # expect: safe div
    return [seq[i * size : (i + 1) * size] for i in range(n)]
