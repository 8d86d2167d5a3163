"""Fisher's linear discriminant through the pseudo-inverse of the scatter (the fixed twin).

The within-class scatter is singular when a class repeats one embedding (a collapsed encoder) or
an embedding dimension is constant: the solve for the discriminant direction raises.
"""

import torch


def fisher_direction(class_a, class_b):
    mean_a, mean_b = class_a.mean(0), class_b.mean(0)
    scatter = (class_a - mean_a).T @ (class_a - mean_a) + (class_b - mean_b).T @ (class_b - mean_b)
    direction = torch.linalg.pinv(scatter) @ (mean_b - mean_a)  # expect: safe inverse
    return direction


torch.manual_seed(6)
class_a = torch.randn(10, 4)
class_b = torch.randn(10, 4) + 1.0
print(fisher_direction(class_a, class_b))
