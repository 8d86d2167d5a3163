"""Small helpers of a training project: meters, timers, accuracy."""
import time

import torch


class AverageMeter:
    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.val = 0.0
        self.sum = 0.0
        self.count = 0
        self.avg = 0.0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count  # expect: safe div


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
        res.append(correct_k.mul_(100.0 / batch_size))  # expect: safe div
    return res


def throughput(n_items, start):
    elapsed = time.time() - start
    return n_items / elapsed  # expect: safe div


def format_eta(done, total, elapsed):
    rate = done / max(elapsed, 1e-9)  # expect: safe div
    remaining = (total - done) / rate  # expect: safe div
    return f"{remaining // 60:.0f}m{remaining % 60:.0f}s"  # expect: safe div, safe div
