import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
args = parser.parse_args()

x = torch.load(args.data)
print(torch.log(x))
