import torch

x = torch.randn(3)
while True:  # never ends
    x = x + 0
print(torch.log(x))
