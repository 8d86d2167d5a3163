"""A two-layer ReLU classifier as an nn.Module whose layers are zero-initialised with nn.init.zeros_,
trained by SGD on 100-row batches of 784 features, the log of a softmax taken by hand in the loss.
Under zero init every hidden unit is the same and a ReLU at 0 passes no gradient back."""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 32)
        self.out = nn.Linear(32, 10)
        for layer in (self.hidden, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return torch.softmax(self.out(torch.relu(self.hidden(x))), dim=1)


torch.manual_seed(0)
images = torch.rand(500, 784)
targets = torch.randint(0, 10, (500,))
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(30):
    for start in range(0, 500, 100):
        probs = model(images[start:start + 100])
        loss = torch.mean(-torch.log(probs[torch.arange(100), targets[start:start + 100]]))  # expect: confirmed log
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
