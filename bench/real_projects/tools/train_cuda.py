"""A script that insists on a GPU."""
import torch
import torch.nn as nn

device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
x = torch.randn(16, 4, device=device)
logits = model(x)
log_probs = torch.log(torch.softmax(logits, dim=-1))  # expect: possible log
print(log_probs.mean().item())
