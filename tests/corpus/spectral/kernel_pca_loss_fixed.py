"""A kernel-PCA feature loss with a tie breaker on the Gram matrix (the fixed twin).

The student's top eigenvectors of its centred linear-kernel Gram matrix are matched to the
teacher's. When the student maps the batch to one point, its Gram matrix is 0: every eigenvalue
is 0, and the backward pass through ``torch.linalg.eigh`` is NaN.
"""

import torch
from torch import nn


def top_vectors(features, k):
    centred = features - features.mean(0)
    gram = centred @ centred.T
    # a tie breaker: distinct diagonal entries keep the eigenvalues apart
    gram = gram + 1e-5 * torch.diag(torch.arange(gram.shape[0], dtype=gram.dtype))
    values, vectors = torch.linalg.eigh(gram)  # expect: unproven spectral
    return vectors[:, -k:]


def distillation_loss(student, teacher_features, batch):
    s = top_vectors(student(batch), 2)
    t = top_vectors(teacher_features, 2)
    return 2 - (s.T @ t).pow(2).sum()


torch.manual_seed(5)
student = nn.Linear(4, 3, bias=False)
batch = torch.randn(7, 4)
teacher_features = torch.randn(7, 5)
loss = distillation_loss(student, teacher_features, batch)
loss.backward()
print(loss.item())
