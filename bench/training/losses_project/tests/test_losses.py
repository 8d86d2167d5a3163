import torch

from pkg.losses import hellinger_loss


def test_hellinger_loss_is_bounded_on_redrawn_predictions():
    torch.manual_seed(0)
    target_root = torch.full((8, 5), 0.2).sqrt()
    for _ in range(20):
        logits = (torch.randn(8, 5) * 3).requires_grad_()
        loss = hellinger_loss(logits, target_root)
        assert 0.0 <= loss.item() <= 1.0
