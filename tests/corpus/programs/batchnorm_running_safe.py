"""A hand-written BatchNorm1d with running statistics, done the careful way.

Batch statistics use the biased variance (defined for one sample) and eps goes
inside the square root, exactly like torch.nn.BatchNorm1d.
"""

import torch
import torch.nn as nn


class BatchNorm(nn.Module):
    def __init__(self, dim, momentum=0.1):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))
        self.momentum = momentum

    def forward(self, x):
        if self.training:
            # NaN only for an empty batch.
            mean = x.mean(0)
            var = x.var(0, unbiased=False)  # expect: safe var
            with torch.no_grad():
                self.running_mean.lerp_(mean, self.momentum)
                self.running_var.lerp_(var, self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        x_hat = (x - mean) / torch.sqrt(var.clamp(min=0.0) + 1e-5)  # expect: safe div, safe sqrt
        return self.gamma * x_hat + self.beta


if __name__ == "__main__":
    torch.manual_seed(0)
    bn = BatchNorm(6)
    for _ in range(5):
        out = bn(torch.randn(16, 6) * 3 + 1)
    bn.eval()
    print(out.shape, bn(torch.randn(1, 6)))
