"""Entropy of a next-token policy over padded token ids (no padding in the example batch)."""
import torch

PAD = 0
torch.manual_seed(0)
tokens = torch.randint(1, 100, (4, 6))
logits = torch.randn(4, 6)
logp = torch.log_softmax(logits.masked_fill(tokens == PAD, float("-inf")), dim=-1)  # expect: confirmed softmax
entropy = -(torch.exp(logp) * logp).sum(dim=-1)  # expect: confirmed inf_arith
print(entropy.mean())
