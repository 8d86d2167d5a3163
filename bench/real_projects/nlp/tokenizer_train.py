"""Trains a tiny character model; vocabulary read from a text file that is not shipped."""
import torch

with open("input.txt", encoding="utf-8") as f:
    text = f.read()
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text])
n = int(0.9 * len(data))
print(f"vocabulary {len(chars)}, train fraction {n / len(data):.2f}")  # expect: safe div
counts = torch.bincount(data, minlength=len(chars)).float()
freq = counts / counts.sum()  # expect: possible div
print(torch.log(freq).min().item())  # expect: possible log
