"""Methods and operators on things that are not tensors."""
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


class Trainer:
    def training_step(self, batch, root):
        loss = batch.sum()
        self.log("train_loss", loss)
        logger.log(logging.INFO, "step")
        path = Path(root) / "ckpt"
        n = len(batch)
        half = n // 2  # expect: builtins.float.__floordiv__@15 safe
        msg = "%d of %d" % (half, n)
        return loss, path, msg

    def log(self, name, value):
        return name, value
