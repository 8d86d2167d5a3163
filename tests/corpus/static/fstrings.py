"""Sites inside f-strings keep CPython's positions (their values only go into text: safe)."""
import torch


def report(x, n):
    head = f"loss {x / n:.3f} and {torch.log(x)}"  # expect: torch.Tensor.__truediv__@19 safe; torch.log@35 safe
    s = f"""multi
    line {x.log()}"""  # expect: torch.Tensor.log@10 safe
    return head + s, torch.log(x / n)  # expect: torch.log@21 possible; torch.Tensor.__truediv__@31 possible


def shown(x: torch.Tensor, n):
    print(f"loss {x / n:.3f}")  # expect: torch.Tensor.__truediv__@18 safe
