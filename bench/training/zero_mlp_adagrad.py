"""A two-layer classifier with a sigmoid hidden layer as an nn.Module whose layers are zero-initialised with
nn.init.zeros_, trained by Adagrad on 100-row batches of 784 features, the log of a
softmax taken by hand in the loss."""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 64)
        self.out = nn.Linear(64, 10)
        for layer in (self.hidden, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return torch.softmax(self.out(torch.sigmoid(self.hidden(x))), dim=1)


torch.manual_seed(0)
images = torch.rand(500, 784)
targets = torch.randint(0, 10, (500,))
model = Net()
optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)

for epoch in range(30):
    for start in range(0, 500, 100):
        probs = model(images[start:start + 100])
        picked = probs[torch.arange(100), targets[start:start + 100]]
        loss = -torch.log(picked).mean()  # expect: confirmed log
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
