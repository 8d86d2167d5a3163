"""Knowledge distillation with a hand-written KL, importing torch under other names."""

import torch as th
import torch.nn.functional as F
from torch import log, sqrt as root


def distill_kl(student_logits, teacher_logits, T=4.0):
    p = th.softmax(teacher_logits / T, dim=-1)
    q = th.softmax(student_logits / T, dim=-1)
    # Either distribution can hold an exact 0 once the logits spread by ~100 * T.
    return (p * (log(p) - log(q))).sum(-1) * T * T  # expect: confirmed log, confirmed log


def distill_kl_safe(student_logits, teacher_logits, T=4.0):
    p = th.softmax(teacher_logits / T, dim=-1)
    log_q = F.log_softmax(student_logits / T, dim=-1)
    return (p * (log(p + 1e-12) - log_q)).sum(-1) * T * T  # expect: safe log


def feature_distance(a, b):
    # Euclidean distance of features: the sum of squares is >= 0, + 1e-12 keeps the root's gradient finite.
    return root(((a - b) ** 2).sum(-1) + 1e-12)  # expect: safe sqrt


def rms_gap(a, b):
    # A difference is not a square: a - b < 0 gives NaN. (a's last size is 0 only for an empty a.)
    return root((a.norm(dim=-1) - b.norm(dim=-1)) / a.shape[-1])  # expect: confirmed sqrt, safe div


if __name__ == "__main__":
    th.manual_seed(0)
    s, t = th.randn(8, 10), th.randn(8, 10) * 3
    print(distill_kl(s, t).sum().item(), distill_kl_safe(s, t).sum().item(), feature_distance(s, t).sum().item())
