"""MNIST-style classifier trained from the command line (synthetic data, no download)."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, hidden=64, dropout=0.25):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = self.drop(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def make_loader(n, batch_size):
    xs = torch.randn(n, 1, 28, 28)
    ys = torch.randint(0, 10, (n,))
    return [(xs[i : i + batch_size], ys[i : i + batch_size]) for i in range(0, n, batch_size)]


def train(args, model, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:  # expect: safe div
            done = 100.0 * batch_idx / len(loader)  # expect: safe div
            print(f"epoch {epoch} [{batch_idx}/{len(loader)} ({done:.0f}%)] loss {loss.item():.4f}")


def test(model, loader, n):
    model.eval()
    test_loss = 0.0
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1).eq(target).sum().item()
    test_loss /= n  # expect: safe div
    print(f"test loss {test_loss:.4f}, accuracy {100.0 * correct / n:.1f}%")  # expect: safe div


def main():
    parser = argparse.ArgumentParser(description="MNIST-style example")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--samples", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(1)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loader = make_loader(args.samples, args.batch_size)
    steps_per_epoch = args.samples // args.batch_size  # expect: safe div
    print("steps per epoch", steps_per_epoch)
    for epoch in range(1, args.epochs + 1):
        train(args, model, loader, optimizer, epoch)
        test(model, loader, args.samples)


if __name__ == "__main__":
    main()
