"""Mini-batches from a TensorDataset and a DataLoader, a linear classifier, log of softmax."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.cat([torch.randn(16, 4) + 3, torch.randn(16, 4) - 3])
labels = torch.cat([torch.zeros(16), torch.ones(16)]).long()
loader = DataLoader(TensorDataset(features, labels), batch_size=8, shuffle=False)

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
# Warm-up that should have been capped at 1.0.
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0015 ** it)

done = False
for epoch in range(1_000_000):
    for xb, yb in loader:
        probs = F.softmax(model(xb), dim=1)
        loss = -(F.one_hot(yb, 2) * torch.log(probs)).sum(1).mean()  # expect: confirmed log
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if not torch.isfinite(loss):
            print(f"non-finite loss {loss.item()} at step {epoch}")
            done = True
            break
    if done:
        break
