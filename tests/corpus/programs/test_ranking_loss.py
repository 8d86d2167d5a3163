"""The project's own unit tests for ranking_loss.py: they pass on ordinary queries."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ranking_loss import Scorer, ranknet_loss, ranknet_loss_softplus  # noqa: E402


def test_correct_order_costs_less_than_reversed():
    relevance = torch.tensor([3.0, 2.0, 1.0, 0.0])
    good = torch.tensor([2.0, 1.0, 0.0, -1.0])
    assert ranknet_loss(good, relevance) < ranknet_loss(-good, relevance)
    assert ranknet_loss_softplus(good, relevance) < ranknet_loss_softplus(-good, relevance)


def test_both_forms_agree_on_moderate_scores():
    torch.manual_seed(0)
    scorer = Scorer()
    docs = torch.randn(6, 10)
    relevance = torch.tensor([2.0, 0.0, 1.0, 0.0, 3.0, 1.0])
    scores = scorer(docs)
    assert torch.allclose(ranknet_loss(scores, relevance), ranknet_loss_softplus(scores, relevance), atol=1e-5)
