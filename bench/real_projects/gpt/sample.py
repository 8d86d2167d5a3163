"""Sampling helpers: temperature, top-p, repetition penalty."""
import torch


def sample_with_temperature(logits, temperature):
    probs = torch.exp(logits / temperature)  # expect: possible exp, possible div
    return probs / probs.sum(-1, keepdim=True)  # expect: possible div


def top_p_filter(logits, top_p=0.9):
    sorted_logits, sorted_idx = torch.sort(logits, descending=True)
    cumulative = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
    remove = cumulative > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    sorted_logits[remove] = float("-inf")
    return sorted_logits.scatter(-1, sorted_idx, sorted_logits)


def stable_sample(logits, temperature=0.8):
    t = max(temperature, 1e-5)
    scaled = logits / t  # expect: safe div
    return torch.softmax(scaled, dim=-1)
