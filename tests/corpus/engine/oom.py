import torch

chunks = []
while True:  # grows without bound
    chunks.append(torch.ones(25_000_000))
print(torch.log(chunks[0]))
