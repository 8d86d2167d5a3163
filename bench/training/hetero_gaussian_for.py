"""Regression with a predicted noise scale that nothing keeps positive: sigma is linear in
the input, and the Gaussian negative log-likelihood takes its log."""
import torch

torch.manual_seed(0)
x = torch.linspace(-1, 1, 64).unsqueeze(1)
y = 2 * x + 0.1 * torch.randn(64, 1)

mu_layer = torch.nn.Linear(1, 1)
sigma_w = torch.tensor([[0.0]], requires_grad=True)
sigma_b = torch.tensor([1.0], requires_grad=True)
optimizer = torch.optim.SGD(list(mu_layer.parameters()) + [sigma_w, sigma_b], lr=0.015)

for step in range(2_000_000):
    mu = mu_layer(x)
    sigma = x @ sigma_w + sigma_b
    nll = (torch.log(sigma) + (y - mu) ** 2 / (2 * sigma ** 2)).mean()  # expect: confirmed log, possible div
    optimizer.zero_grad()
    nll.backward()
    optimizer.step()
    if not torch.isfinite(nll):
        print(f"non-finite loss {nll.item()} at step {step}")
        break
