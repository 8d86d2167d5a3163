"""Sites inside f-strings keep CPython's positions."""
import torch


def report(x, n):
    head = f"loss {x / n:.3f} and {torch.log(x)}"  # expect: torch.Tensor.__truediv__@19 possible; torch.log@35 possible
    s = f"""multi
    line {x.log()}"""  # expect: torch.Tensor.log@10 possible
    return head + s


def shown(x: torch.Tensor, n):
    print(f"loss {x / n:.3f}")  # expect: torch.Tensor.__truediv__@18 safe
