"""An L2 penalty on the weights of a layer converted to float16, summed in float32."""

import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(256, 256).half()
w = layer.weight
penalty = (w.float() * w.float()).sum()  # expect: safe overflow
print("penalty", float(penalty))
