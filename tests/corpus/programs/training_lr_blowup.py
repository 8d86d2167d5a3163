"""A digit classifier trained by a plain script with a learning rate a little too high.

In the style of GRIST's benchmark subjects: synthetic data from a fixed seed,
a training loop at module level, and the hand-written cross-entropy. Nothing
fails at first; after a few hundred steps the over-confident model drives some
class probability to exactly 0, log(0) = -inf, and 0 * -inf makes the loss NaN.
The script stops and reports the step where that happens.
"""

import torch
import torch.nn.functional as F

torch.manual_seed(0)
gen = torch.Generator().manual_seed(0)
BATCH, N_CLASSES = 64, 10
W1 = (0.05 * torch.randn(784, 128)).requires_grad_()
W2 = (0.05 * torch.randn(128, N_CLASSES)).requires_grad_()
opt = torch.optim.SGD([W1, W2], lr=0.07, momentum=0.9)

for step in range(3000):
    labels = torch.randint(0, N_CLASSES, (BATCH,), generator=gen)
    images = 0.05 * torch.rand(BATCH, 784, generator=gen)
    grid = images.view(BATCH, 28, 28)
    for i, c in enumerate(labels.tolist()):
        r, col = 4 + 6 * (c // 4), 4 + 6 * (c % 4)
        grid[i, r:r + 6, col:col + 6] += 0.9
    # Population std (defined for any batch) plus 1e-3: the division cannot fail.
    x = (images - images.mean(0)) / (images.std(0, unbiased=False) + 1e-3)  # expect: safe div, safe var
    logits = torch.relu(x @ W1) @ W2
    probs = torch.softmax(logits, dim=1)
    loss = -(F.one_hot(labels, N_CLASSES).float() * torch.log(probs)).sum(1).mean()  # expect: confirmed log
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        print(f"step {step:4d}  loss {loss.item():.6f}")
