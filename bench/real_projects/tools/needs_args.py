"""A training entry point whose arguments are required."""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--scale", type=float, required=True)
    args = parser.parse_args()
    x = torch.randn(8)
    for _ in range(args.epochs):
        x = x / args.scale  # expect: safe div
    print(x.sum().item())


if __name__ == "__main__":
    main()
