"""Attention through the fused kernel, causal by flag; and an explicit padding mask."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FlashBlock(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # expect: safe div
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # expect: safe div
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # expect: safe div
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def padded_attention(q, k, v, pad_mask):
    """pad_mask is True at padding: a sequence that is all padding has a row of -inf."""
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5  # expect: safe div, safe pow
    scores = scores.masked_fill(pad_mask[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # expect: possible softmax
