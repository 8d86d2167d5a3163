"""Sites inside comprehensions and lambdas; loop targets over literals."""
import torch


def scales(x: torch.Tensor, probs):
    logs = [torch.log(p) for p in probs]  # expect: torch.log@12 possible
    parts = [x / n for n in (1, 2, 4)]  # expect: torch.Tensor.__truediv__@13 safe
    f = lambda t: t.log()  # noqa: E731  # expect: torch.Tensor.log@18 possible
    for k in [0.5, 1.0]:
        parts.append(x / k)  # expect: torch.Tensor.__truediv__@21 safe
    return logs, parts, f
