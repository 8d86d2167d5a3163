"""Class centroids (prototypes) of a batch of embeddings, and a capped loss average.

A class absent from the batch has no member, so its centroid is 0 / 0. The
robust average drops the losses above a cap; when every loss is above it,
nothing is left to average: 0 / 0 again.
"""

import torch


def class_centroids(feats, labels, num_classes=3):
    centroids = []
    for c in range(num_classes):
        members = feats[labels == c]
        centroids.append(members.sum(0) / members.shape[0])  # expect: confirmed div
    return torch.stack(centroids)


def robust_average(losses, cap=10.0):
    kept = [loss for loss in losses if loss < cap]
    total = sum(kept, torch.zeros(()))
    return total / len(kept)  # expect: confirmed div


if __name__ == "__main__":
    torch.manual_seed(0)
    feats, labels = torch.randn(12, 4), torch.arange(12) % 3
    print(class_centroids(feats, labels).shape, robust_average([torch.tensor(1.0), torch.tensor(2.5)]))
