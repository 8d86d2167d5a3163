"""Precision, recall and F1 from a confusion matrix."""
import torch


def confusion(pred, target, num_classes):
    idx = target * num_classes + pred
    return torch.bincount(idx, minlength=num_classes * num_classes).view(num_classes, num_classes)


def f1_scores(cm):
    tp = cm.diag().float()
    precision = tp / cm.sum(0).float()  # expect: possible div
    recall = tp / cm.sum(1).float()  # expect: possible div
    return 2 * precision * recall / (precision + recall)  # expect: possible div


def accuracy_percent(correct, total):
    return 100.0 * correct / total  # expect: safe div
