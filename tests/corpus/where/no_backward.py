"""Log-scaled features for a report: nothing is differentiated, so a discarded NaN is harmless."""

import torch

torch.manual_seed(0)
values = torch.randn(20)
logged = torch.where(values > 0, torch.log(values), torch.zeros_like(values))  # expect: unproven log
print(logged.sum())
