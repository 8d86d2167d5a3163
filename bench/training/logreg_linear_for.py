"""Binary classifier: nn.Linear + sigmoid on data made with torch.Tensor(list), a long
for-loop over epochs, a results file written at the end."""
import torch
import torch.nn as nn

torch.manual_seed(0)
x_data = torch.Tensor([[0.5, 1.0], [1.0, 2.0], [1.5, 0.5], [3.0, 3.5], [4.0, 3.0], [3.5, 4.5]])
y_data = torch.Tensor([[0], [0], [0], [1], [1], [1]])

model = nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

for epoch in range(2_000_000):
    hypothesis = torch.sigmoid(model(x_data))
    cost = -(y_data * torch.log(hypothesis) + (1 - y_data) * torch.log(1 - hypothesis)).mean()  # expect: confirmed log, confirmed log
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    if torch.isnan(cost):
        print(f"non-finite loss {cost.item()} at step {epoch}")
        break

with open("results.txt", "w") as f:
    f.write(f"final cost {cost.item()}\n")
