"""Style loss with Gram matrices of float16 feature maps, accumulated in float32."""

import torch
import torch.nn.functional as F

torch.manual_seed(0)


def gram(x):
    b, c, hw = x.shape
    return (x.float() @ x.float().transpose(1, 2)) / (c * hw)  # expect: safe overflow, unproven div


features = (torch.rand(2, 32, 16 * 16) * 3).half()  # post-ReLU activations
style = torch.rand(2, 32, 16 * 16) * 3
target = gram(style.half())
loss = F.mse_loss(gram(features).float(), target.float())
print("style loss", float(loss))
