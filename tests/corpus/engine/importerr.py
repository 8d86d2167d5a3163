import torch
import not_a_real_module_grist

print(torch.log(torch.randn(3)))
