"""torch.tensor data, a hidden layer, Adam, and the binary cross-entropy written by hand;
progress is appended to a log file every thousand steps."""
import torch

torch.manual_seed(0)
x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]] * 4)
y = torch.tensor([[0.0], [1.0], [1.0], [0.0]] * 4)

w1 = torch.randn(2, 8, requires_grad=True)
b1 = torch.zeros(8, requires_grad=True)
w2 = torch.randn(8, 1, requires_grad=True)
b2 = torch.zeros(1, requires_grad=True)
optimizer = torch.optim.Adam([w1, b1, w2, b2], lr=0.02)

step = 0
while True:
    p = torch.sigmoid(torch.tanh(x @ w1 + b1) @ w2 + b2)
    loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()  # expect: confirmed log, confirmed log
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    if not torch.isfinite(loss):
        print(f"non-finite loss {loss.item()} at step {step}")
        break
    if step % 1000 == 0:
        with open("train_log.txt", "a") as log:
            log.write(f"{step} {loss.item():.6f}\n")
