"""Label-smoothed cross entropy and a KL distillation loss."""
import torch
import torch.nn.functional as F


def label_smoothed_nll(logits, target, epsilon=0.1):
    lprobs = F.log_softmax(logits, dim=-1)
    nll = -lprobs.gather(-1, target[:, None]).squeeze(-1)
    smooth = -lprobs.sum(-1)
    eps_i = epsilon / lprobs.size(-1)  # expect: safe div
    return ((1.0 - epsilon) * nll + eps_i * smooth).mean()


def distill_kl(student_logits, teacher_logits, T=2.0):
    p = F.softmax(teacher_logits / T, dim=-1)  # expect: safe div
    log_q = F.log_softmax(student_logits / T, dim=-1)  # expect: safe div
    return (p * (torch.log(p) - log_q)).sum(-1).mean() * T * T  # expect: possible log
