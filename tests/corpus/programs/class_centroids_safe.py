"""Class centroids and averages whose divisors the code itself proves non-zero."""

import torch


def class_centroids(feats, labels, num_classes=3):
    centroids = []
    for c in range(num_classes):
        members = feats[labels == c]
        if members.shape[0] == 0:
            # An absent class keeps a zero centroid instead of 0 / 0.
            centroids.append(feats.new_zeros(feats.shape[1]))
            continue
        centroids.append(members.sum(0) / members.shape[0])  # expect: safe div
    return torch.stack(centroids)


def robust_average(losses, cap=10.0):
    kept = [loss for loss in losses if loss < cap]
    if not kept:
        return torch.zeros(())
    return sum(kept, torch.zeros(())) / len(kept)  # expect: safe div


def support_prototype(support):
    """Prototype of one class from its support shots (n_shot, dim), centred on the first shot."""
    # Indexing the first shot raises on an empty support, so past it there is at least one row.
    anchor = support[0]
    return (support - anchor).sum(0) / support.shape[0] + anchor  # expect: safe div


if __name__ == "__main__":
    torch.manual_seed(0)
    feats, labels = torch.randn(12, 4), torch.zeros(12, dtype=torch.long)
    print(class_centroids(feats, labels).shape, robust_average([torch.tensor(20.0)]),
          support_prototype(torch.randn(5, 4)).shape)
