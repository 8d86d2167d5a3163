"""Fixed twin of shadowed_padded_entropy.py: padding is masked with the lowest finite value, not -inf."""
import torch

PAD = 0
torch.manual_seed(0)
tokens = torch.randint(1, 100, (4, 6))
logits = torch.randn(4, 6)
logp = torch.log_softmax(logits.masked_fill(tokens == PAD, torch.finfo(logits.dtype).min), dim=-1)
entropy = -(torch.exp(logp) * logp).sum(dim=-1)  # expect: safe exp
print(entropy.mean())
