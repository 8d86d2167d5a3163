"""Training loop of the small GPT: cosine learning-rate schedule, perplexity."""
import argparse
import math

import torch

from model import GPT, GPTConfig


def get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters  # expect: safe div
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)  # expect: safe div
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-iters", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--eval-interval", type=int, default=2)
    args = parser.parse_args()
    config = GPTConfig()
    model = GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    total, count = 0.0, 0
    for it in range(args.max_iters):
        lr = get_lr(it, args.lr, args.warmup, args.max_iters, args.lr / 10)  # expect: safe div
        for g in opt.param_groups:
            g["lr"] = lr
        x = torch.randint(0, config.vocab_size, (4, config.block_size))
        _, loss = model(x, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        count += 1
        if it % args.eval_interval == 0:  # expect: safe div
            avg = total / count  # expect: safe div
            print(f"iter {it}: loss {avg:.3f}, perplexity {math.exp(avg):.1f}")  # expect: safe exp


if __name__ == "__main__":
    main()
