"""An MNIST-style digit classifier, trained for a few steps on synthetic 28x28 images.

    python examples/mnist_classifier.py

The model is an ordinary two-layer MLP. The loss is the hand-written
cross-entropy many tutorials show, and the inputs are standardised per pixel
with statistics of the batch. Both hide NaN bugs that real data reaches:
a confident model drives a softmax entry to exactly 0 (log(0) = -inf, and
0 * -inf = NaN in the sum), MNIST's blank border pixels have zero spread, and
the last batch of an epoch can hold a single image.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

N_CLASSES = 10
SIDE = 28


class MLP(nn.Module):
    def __init__(self, n_in=SIDE * SIDE, hidden=128, n_classes=N_CLASSES):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def standardise(images):
    """Per-pixel standardisation with the batch's own statistics."""
    flat = images.flatten(1)
    # An empty batch (a filter that kept nothing) makes this mean NaN.
    mean = flat.mean(0)
    # One image in the batch: std with Bessel's correction divides by n - 1 = 0.
    std = flat.std(0)  # expect: confirmed var
    # A pixel that is constant over the batch (the blank border of every digit) has std 0.
    return (flat - mean) / std  # expect: confirmed div


def cross_entropy(logits, target):
    onehot = F.one_hot(target, N_CLASSES).float()
    probs = torch.softmax(logits, dim=1)
    # softmax is exactly 0 for a class whose logit trails the best by more than ~104.
    # The empty-batch mean is a risk only: every batch here holds at least one image.
    return -(onehot * torch.log(probs)).sum(1).mean()  # expect: confirmed log


def accuracy(logits, target):
    return (logits.argmax(1) == target).float().mean()


def synthetic_digits(n, generator):
    """Noisy images with a bright 6x6 blob whose position encodes the class."""
    labels = torch.randint(0, N_CLASSES, (n,), generator=generator)
    images = 0.05 * torch.rand(n, 1, SIDE, SIDE, generator=generator)
    for i, c in enumerate(labels.tolist()):
        row, col = 4 + 6 * (c // 4), 4 + 6 * (c % 4)
        images[i, 0, row:row + 6, col:col + 6] += 0.9
    return images, labels


def train(steps=15, batch=64, lr=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        images, labels = synthetic_digits(batch, g)
        logits = model(standardise(images))
        loss = cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}  acc {accuracy(logits, labels).item():.2f}")
    return model


if __name__ == "__main__":
    train()
