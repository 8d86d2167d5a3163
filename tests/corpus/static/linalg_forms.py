"""Linear-algebra sites: the operand is a whole matrix, whose spectrum the static pass does not
bound, so every spelling is a possible site (never proved safe by entry ranges)."""
import torch


def log_volume(cov):
    a = torch.logdet(cov)  # expect: torch.logdet@8 possible
    b = cov.logdet()  # expect: torch.Tensor.logdet@8 possible
    return a + b


def factor(k, noise):
    jittered = k + noise * torch.eye(k.shape[-1])
    l1 = torch.linalg.cholesky(jittered)  # expect: torch.linalg.cholesky@9 possible
    l2 = torch.cholesky(k)  # expect: torch.cholesky@9 possible
    l3 = k.cholesky()  # expect: torch.Tensor.cholesky@9 possible
    return l1, l2, l3


def invert(k, b):
    p1 = torch.inverse(k)  # expect: torch.inverse@9 possible
    p2 = k.inverse()  # expect: torch.Tensor.inverse@9 possible
    p3 = torch.linalg.inv(k)  # expect: torch.linalg.inv@9 possible
    x = torch.linalg.solve(k, b)  # expect: torch.linalg.solve@8 possible
    return p1, p2, p3, x


def decompose(a, m):
    values, vectors = torch.linalg.eigh(a)  # expect: torch.linalg.eigh@22 possible
    only_values, _ = torch.linalg.eigh(a)
    u, s, vh = torch.linalg.svd(m, full_matrices=False)  # expect: torch.linalg.svd@15 possible
    _, s2, _ = torch.linalg.svd(m)
    u3, s3, v3 = m.svd()  # expect: torch.Tensor.svd@17 possible
    s4 = torch.svd(m, compute_uv=False).S
    return vectors, u, vh, u3, v3, only_values, s, s2, s3, s4, torch.linalg.eigvalsh(a), torch.linalg.svdvals(m)
