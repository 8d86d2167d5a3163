"""Sites inside f-strings keep CPython's positions."""
import torch


def report(x, n):
    print(f"loss {x / n:.3f} and {torch.log(x)}")  # expect: torch.Tensor.__truediv__@18 possible; torch.log@34 possible
    s = f"""multi
    line {x.log()}"""  # expect: torch.Tensor.log@10 possible
    return s
