from .some_loss import hellinger_loss

__all__ = ["hellinger_loss"]
