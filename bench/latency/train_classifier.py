"""Train a small classifier on synthetic clusters: the kind of 300-line script an editor opens.

It has what such scripts have: a config, a dataset class and a DataLoader, a model class, a
hand-written loss, metrics, an evaluation pass, a learning-rate schedule, checkpoints and a
command line. The hand-written cross-entropy takes the log of a softmax: once the model is
confident, a probability rounds to exactly 0 and the loss is infinite.

The latency bench (bench/server_latency.py) opens this file in the language server.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


@dataclass
class Config:
    """Everything a run depends on, saved next to its checkpoints."""

    n_classes: int = 4
    n_features: int = 8
    samples_per_class: int = 64
    spread: float = 0.6
    hidden: int = 32
    depth: int = 2
    dropout: float = 0.0
    batch_size: int = 32
    epochs: int = 200
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    warmup_epochs: int = 5
    label_smoothing: float = 0.0
    temperature: float = 1.0
    seed: int = 0
    out_dir: str = "runs/classifier"
    log_every: int = 10
    tags: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


def make_clusters(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs around random centres, one per class."""
    rng = np.random.RandomState(cfg.seed)
    centres = rng.uniform(-3.0, 3.0, size=(cfg.n_classes, cfg.n_features))
    xs, ys = [], []
    for label, centre in enumerate(centres):
        xs.append(centre + cfg.spread * rng.randn(cfg.samples_per_class, cfg.n_features))
        ys.append(np.full(cfg.samples_per_class, label))
    features = np.concatenate(xs).astype(np.float32)
    labels = np.concatenate(ys).astype(np.int64)
    order = rng.permutation(len(labels))
    return features[order], labels[order]


def standardise(features: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance per feature (the epsilon keeps constant features finite)."""
    mean = features.mean(axis=0, keepdims=True)
    std = features.std(axis=0, keepdims=True)
    return (features - mean) / (std + 1e-6)


class ClusterDataset(Dataset):
    """Feature rows and their labels as tensors."""

    def __init__(self, features: np.ndarray, labels: np.ndarray) -> None:
        self.features = torch.from_numpy(features)
        self.labels = torch.from_numpy(labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[index], self.labels[index]


def split(dataset: ClusterDataset, holdout: float) -> tuple[ClusterDataset, ClusterDataset]:
    """The first (1 - holdout) share for training, the rest for evaluation."""
    cut = int(len(dataset) * (1.0 - holdout))
    train = ClusterDataset(dataset.features[:cut].numpy(), dataset.labels[:cut].numpy())
    held = ClusterDataset(dataset.features[cut:].numpy(), dataset.labels[cut:].numpy())
    return train, held


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------


class Classifier(nn.Module):
    """An MLP: depth hidden layers of the same width, then the class scores."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = cfg.n_features
        for _ in range(cfg.depth):
            layers += [nn.Linear(width, cfg.hidden), nn.ReLU()]
            if cfg.dropout > 0:
                layers.append(nn.Dropout(cfg.dropout))
            width = cfg.hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, cfg.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------
# loss and metrics
# ---------------------------------------------------------------------------


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, smoothing: float, temperature: float) -> torch.Tensor:
    """Cross-entropy with label smoothing, written out by hand."""
    n_classes = logits.shape[1]
    probs = F.softmax(logits / temperature, dim=1)
    off = smoothing / n_classes
    one_hot = F.one_hot(target, n_classes).float()
    soft = one_hot * (1.0 - smoothing) + off
    return -(soft * torch.log(probs)).sum(dim=1).mean()


def accuracy(logits: torch.Tensor, target: torch.Tensor) -> float:
    return (logits.argmax(dim=1) == target).float().mean().item()


def confidence(logits: torch.Tensor) -> float:
    """Mean probability of the predicted class."""
    return F.softmax(logits, dim=1).max(dim=1).values.mean().item()


def gradient_norm(model: nn.Module) -> float:
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += p.grad.pow(2).sum().item()
    return math.sqrt(total)


class RunningMean:
    """Mean of the values added so far (per epoch)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, value: float, weight: int = 1) -> None:
        self.total += value * weight
        self.count += weight

    @property
    def value(self) -> float:
        return self.total / max(self.count, 1)


# ---------------------------------------------------------------------------
# schedule and checkpoints
# ---------------------------------------------------------------------------


def learning_rate(cfg: Config, epoch: int) -> float:
    """Linear warm-up, then a slow increase the author meant to be a decay."""
    if epoch < cfg.warmup_epochs:
        return cfg.lr * (epoch + 1) / cfg.warmup_epochs
    return cfg.lr * (1.0 + 0.05 * (epoch - cfg.warmup_epochs))


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def save_checkpoint(cfg: Config, model: nn.Module, epoch: int, metrics: dict) -> str:
    os.makedirs(cfg.out_dir, exist_ok=True)
    path = os.path.join(cfg.out_dir, f"epoch_{epoch:04d}.pt")
    torch.save({"model": model.state_dict(), "epoch": epoch, "metrics": metrics}, path)
    with open(os.path.join(cfg.out_dir, "config.json"), "w") as f:
        json.dump(asdict(cfg), f, indent=2)
    return path


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------


def evaluate(model: nn.Module, loader: DataLoader, cfg: Config) -> dict:
    model.eval()
    loss, acc = RunningMean(), RunningMean()
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            loss.add(cross_entropy(logits, y, 0.0, 1.0).item(), len(y))
            acc.add(accuracy(logits, y), len(y))
    model.train()
    return {"loss": loss.value, "accuracy": acc.value}


def train_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer, cfg: Config) -> dict:
    loss_mean, acc_mean, grad_mean = RunningMean(), RunningMean(), RunningMean()
    for x, y in loader:
        logits = model(x)
        loss = cross_entropy(logits, y, cfg.label_smoothing, cfg.temperature)
        optimizer.zero_grad()
        loss.backward()
        grad_mean.add(gradient_norm(model))
        optimizer.step()
        loss_mean.add(loss.item(), len(y))
        acc_mean.add(accuracy(logits, y), len(y))
    return {"loss": loss_mean.value, "accuracy": acc_mean.value, "grad_norm": grad_mean.value}


def train(cfg: Config) -> dict:
    torch.manual_seed(cfg.seed)
    features, labels = make_clusters(cfg)
    dataset = ClusterDataset(standardise(features), labels)
    train_set, held_set = split(dataset, holdout=0.25)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True)
    held_loader = DataLoader(held_set, batch_size=cfg.batch_size)

    model = Classifier(cfg)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    )
    print(f"{count_parameters(model)} parameters, {len(train_set)} training rows")

    history = []
    started = time.time()
    for epoch in range(cfg.epochs):
        set_learning_rate(optimizer, learning_rate(cfg, epoch))
        metrics = train_epoch(model, train_loader, optimizer, cfg)
        if not math.isfinite(metrics["loss"]):
            print(f"epoch {epoch}: the loss is {metrics['loss']}, stopping")
            break
        if epoch % cfg.log_every == 0:
            held = evaluate(model, held_loader, cfg)
            metrics.update({f"held_{k}": v for k, v in held.items()})
            metrics["confidence"] = confidence(model(held_set.features))
            print(
                f"epoch {epoch:4d}  loss {metrics['loss']:.4f}  acc {metrics['accuracy']:.3f}"
                f"  held {held['accuracy']:.3f}  |g| {metrics['grad_norm']:.3f}"
            )
        history.append(metrics)
    elapsed = time.time() - started
    print(f"{len(history)} epochs in {elapsed:.1f} s")
    return {"history": history, "epochs": len(history), "seconds": elapsed}


def parse_args() -> Config:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for name, value in asdict(defaults).items():
        if isinstance(value, list):
            continue
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args()
    return Config(**vars(args))


def main() -> None:
    cfg = parse_args()
    result = train(cfg)
    print(json.dumps({"epochs": result["epochs"], "seconds": round(result["seconds"], 1)}))


if __name__ == "__main__":
    main()
