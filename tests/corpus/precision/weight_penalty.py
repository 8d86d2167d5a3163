"""An L2 penalty on the weights of a layer converted to float16 for inference-time fine-tuning."""

import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(256, 256).half()
w = layer.weight
penalty = (w * w).sum()  # expect: confirmed overflow, unproven overflow
print("penalty", float(penalty))
