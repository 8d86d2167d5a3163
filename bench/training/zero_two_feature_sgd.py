"""Three classes of points in the plane, a zero-initialised linear layer, plain SGD at
lr 0.01, the cross-entropy of a softmax written out by hand."""
import torch

torch.manual_seed(0)
centres = torch.tensor([[0.0, 0.0], [3.0, 3.0], [-3.0, 3.0]])
cls = torch.arange(3).repeat_interleave(50)
points = centres[cls] + torch.randn(150, 2)
onehot = torch.eye(3)[cls]

weights = torch.zeros(2, 3, requires_grad=True)
bias = torch.zeros(3, requires_grad=True)
sgd = torch.optim.SGD([weights, bias], lr=0.01)

for it in range(2000):
    p = torch.softmax(points @ weights + bias, dim=1)
    nll = -(onehot * torch.log(p)).sum(dim=1).mean()  # expect: confirmed log
    sgd.zero_grad()
    nll.backward()
    sgd.step()
    if it % 500 == 0:
        print(f"iteration {it} loss {nll.item():.4f}")
