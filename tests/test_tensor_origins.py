"""Issue 36: arithmetic on Python numbers is no NaN/INF warning; arithmetic on tensors still is.

Each program below is written in an idiom found in public PyTorch projects. They are checked the
way a user checks a project (``grist-lsp --check DIR --static-only --show-safe --format json``,
one run for all of them), and each line marked ``# <- STATUS`` must be reported with that status
(``safe`` with the reason's words after a colon: what ``--show-safe`` prints, of the sites of one
kind with ``safe div: ...``; ``none``: no site).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _deep_schedule(steps: int = 10, copies: int = 10) -> str:
    """A schedule of ``steps`` statements registered as a buffer, read first through ``copies``
    names (asked about first, in source order) and then directly: the deep first question must not
    leave the schedule judged as data for the second (a depth cut was memoised once)."""
    lines = ["import torch", "from torch import nn", "", "", "class Schedule(nn.Module):"]
    lines += ["    def __init__(self, steps=100):", "        super().__init__()"]
    lines += ["        s0 = torch.linspace(0, 1, steps + 1)"]
    lines += [f"        s{i} = torch.cos(s{i - 1}) * 0.5 + 0.25" for i in range(1, steps + 1)]
    lines += [f'        self.register_buffer("table", s{steps})', "", "    def sample(self, x):"]
    lines += ["        v0 = self.table"] + [f"        v{i} = v{i - 1} + 0" for i in range(1, copies)]
    lines += [f"        return torch.log(v{copies - 1} * x)  # <- possible log", ""]
    lines += ["    def direct(self, y):", "        return y / self.table  # <- safe: settings only", ""]
    return "\n".join(lines)


PROGRAMS = {
    # a schedule asked about first from deep inside a function, then directly
    "deep_schedule.py": _deep_schedule(),
    # 1. pathlib joins are not divisions
    "checkpoints.py": """
        from pathlib import Path

        import torch


        def save(model, cfg, opt_save_name):
            save_dir = Path.cwd() / cfg.checkpoint_folder  # <- safe: path join
            opt_file_path = save_dir / opt_save_name  # <- safe: path join
            torch.save(model.state_dict(), opt_file_path)
        """,
    # 2. a module's hyper-parameters are Python ints
    "vit.py": """
        import math

        import torch
        from torch import nn


        def pair(t):
            return t if isinstance(t, tuple) else (t, t)


        class ViT(nn.Module):
            def __init__(self, *, image_size, patch_size, dim, heads, num_stages=3, dim_head=64):
                super().__init__()
                image_height, image_width = pair(image_size)
                patch_height, patch_width = pair(patch_size)
                assert image_height % patch_height == 0  # <- safe: ZeroDivisionError
                num_patches = (image_height // patch_height) * (image_width // patch_width)  # <- safe: ZeroDivisionError
                self.scale = dim_head ** -0.5  # <- safe: ZeroDivisionError
                self.dims = tuple(map(lambda i: (2 ** i) * dim, range(num_stages)))
                self.ph = patch_height
                self.heads = heads
                self.to_patch = nn.Linear(patch_height * patch_width * 3, dim)
                self.pos = nn.Parameter(torch.randn(1, num_patches, dim))

            def forward(self, img):
                w = img.shape[-1]
                h = w // self.ph  # <- safe: ZeroDivisionError
                return self.to_patch(img.flatten(2).transpose(1, 2)) * self.scale, h


        def init_weights(module, config):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))  # <- safe: Python numbers
        """,
    # 3. argparse options and loop counters
    "reinforce_log.py": """
        import argparse
        from itertools import count

        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--log-interval", type=int, default=10)
        args = parser.parse_args()

        running = 10.0
        for i_episode in count(1):
            running = 0.05 * i_episode + 0.95 * running
            if i_episode % args.log_interval == 0:  # <- safe: ZeroDivisionError
                print(i_episode, running)
            if i_episode > 30:
                break
        """,
    # 4. constants and counters
    "train_loop.py": """
        import time

        import torch
        from torch import nn


        class AverageMeter:
            def __init__(self):
                self.reset()

            def reset(self):
                self.sum = 0
                self.count = 0
                self.avg = 0

            def update(self, val, n=1):
                self.sum += val * n
                self.count += n
                self.avg = self.sum / self.count  # <- safe: ZeroDivisionError


        def drop_path(x, drop_prob: float = 0.0):
            keep_prob = 1 - drop_prob
            mask = torch.rand(x.shape[0], 1) < keep_prob
            return x.div(keep_prob) * mask  # <- safe: Python number


        def train(model: nn.Module, batches, args, ngpus_per_node, flops_per_iter):
            gradient_accumulation_steps = 5 * 8
            batch_size = int(args.batch_size / ngpus_per_node)  # <- safe: ZeroDivisionError
            meter = AverageMeter()
            n_correct, n_total = 0, 0
            rewards, rets = [], []
            for x, y in batches:
                t0 = time.time()
                out = model(x)
                loss = nn.functional.cross_entropy(out, y)
                loss = loss / gradient_accumulation_steps  # <- safe: divisor
                loss.backward()
                n_correct += (out.argmax(1) == y).sum().item()
                n_total += y.size(0)
                dt = time.time() - t0
                flops = flops_per_iter * (1.0 / dt)  # <- safe: ZeroDivisionError
                meter.update(loss.item(), batch_size)
                rewards.append(loss.item())
                rets.append(1)
            train_acc = 100.0 * n_correct / n_total  # <- safe: ZeroDivisionError
            mean_reward = sum(rewards) / len(rets)  # <- safe: ZeroDivisionError
            return train_acc, mean_reward, flops
        """,
    # The real ones: each must stay a warning.
    "vae.py": """
        import torch
        from torch import nn


        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(784, 40)

            def reparameterize(self, mu, logvar):
                std = torch.exp(0.5 * logvar)  # <- possible
                return mu + torch.randn_like(std) * std

            def forward(self, x):
                mu, logvar = self.enc(x).chunk(2, dim=-1)
                return self.reparameterize(mu, logvar)
        """,
    "generate.py": """
        import argparse

        import torch
        from torch import nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--temperature", type=float, default=1.0)
        args = parser.parse_args()

        model = nn.Linear(16, 100)
        input = torch.randn(1, 16)
        for i in range(20):
            output = model(input)
            word_weights = output.squeeze().div(args.temperature).exp()  # <- possible exp
            word_idx = torch.multinomial(word_weights, 1)[0]
        """,
    "gcn.py": """
        import torch


        def normalize(adj):
            deg = adj.sum(1)
            d_inv = 1 / deg  # <- possible
            d_inv_sqrt = torch.sqrt(1 / deg)  # <- possible
            return d_inv[:, None] * adj, d_inv_sqrt


        edges = torch.load("edges.pt")
        print(normalize(edges))
        """,
    "reinforce.py": """
        import torch

        eps = 1e-8


        def finish_episode(policy_rewards, gamma=0.99):
            R = 0
            returns = []
            for r in policy_rewards[::-1]:
                R = r + gamma * R
                returns.insert(0, R)
            returns = torch.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)  # <- possible var
            return returns
        """,
    # a training loop in a module of its own: nothing in the file makes the model or the loader,
    # but their uses say what they are (model.train(): a module; loss.backward(): a tensor)
    "engine.py": """
        def train_one_epoch(model, loader, optimizer, criterion):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                out = model(x)
                relative = (out - y) / y  # <- possible div
                loss = criterion(out, y) + relative.abs().mean()
                loss.backward()
                optimizer.step()


        def report(total_loss, steps):
            loss = total_loss(steps)
            loss.backward()
            return loss / steps  # <- possible div
        """,
    # a fixed schedule kept as numpy arrays and looked up at sampled timesteps: the table's values
    "schedule_table.py": """
        import numpy as np
        import torch as th


        def extract(arr, timesteps, broadcast_shape):
            res = th.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
            while len(res.shape) < len(broadcast_shape):
                res = res[..., None]
            return res + th.zeros(broadcast_shape, device=timesteps.device)


        class Diffusion:
            def __init__(self, *, betas):
                betas = np.array(betas, dtype=np.float64)
                alphas = 1.0 - betas
                self.alphas_cumprod = np.cumprod(alphas, axis=0)
                self.alphas_cumprod_prev = np.append(1.0, self.alphas_cumprod[:-1])

            def ddim_sigma(self, x, t, eta=0.0):
                alpha_bar = extract(self.alphas_cumprod, t, x.shape)
                alpha_bar_prev = extract(self.alphas_cumprod_prev, t, x.shape)
                return eta * th.sqrt((1 - alpha_bar_prev) / (1 - alpha_bar))  # <- safe: settings only

            def noisy_scale(self, model, x, t):
                out = model(x, t)
                return th.sqrt(out / extract(self.alphas_cumprod, t, x.shape))  # <- possible sqrt
        """,
    # a schedule registered as buffers (through a local helper) and gathered at sampled timesteps:
    # the table's values (the same helper given data gives data); a buffer the program updates from data is data; a difference of two
    # table values can round below 0 in float32; a list of values collected in a loop is data
    "buffer_schedule.py": """
        import math

        import torch
        import torch.nn.functional as F
        from torch import nn


        def extract(a, t, x_shape):
            b, *_ = t.shape
            out = a.gather(-1, t)
            return out.reshape(b, *((1,) * (len(x_shape) - 1)))


        def cosine_beta_schedule(timesteps, s=0.008):
            t = torch.linspace(0, timesteps, timesteps + 1, dtype=torch.float64) / timesteps
            alphas_cumprod = torch.cos((t + s) / (1 + s) * math.pi * 0.5) ** 2
            alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
            betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
            return torch.clip(betas, 0, 0.999)


        class Diffusion(nn.Module):
            def __init__(self, model, timesteps=1000, eta=1.0):
                super().__init__()
                self.model = model
                self.eta = eta
                alphas_cumprod = torch.cumprod(1.0 - cosine_beta_schedule(timesteps), dim=0)
                register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))
                register_buffer("alphas_cumprod", alphas_cumprod)
                register_buffer("sqrt_recipm1_alphas_cumprod", torch.sqrt(1.0 / alphas_cumprod - 1))
                alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
                register_buffer("sqrt_alphas_cumprod_prev", torch.sqrt(alphas_cumprod_prev))  # <- safe: settings only
                register_buffer("log_alphas_cumprod", torch.log(alphas_cumprod.clamp(min=1e-20)))
                self.register_buffer("running_var", torch.linspace(1.0, 2.0, 10))

            def predict_noise_from_start(self, x_t, t, x0):
                return (x_t - x0) / extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape)  # <- safe: settings only

            def q_posterior(self, x_start, x_t, t):
                mean = extract(self.sqrt_alphas_cumprod_prev, t, x_t.shape) * x_start + x_t
                return mean, extract(self.log_alphas_cumprod, t, x_t.shape)

            def p_sample(self, x, t):
                model_mean, model_log_variance = self.q_posterior(self.model(x, t), x, t)
                noise = (0.5 * model_log_variance).exp() * torch.randn_like(x)  # <- safe: settings only
                return model_mean + noise, (0.5 * model_mean).exp()  # <- possible exp

            def reweighted(self, loss, t, weights):
                return loss / extract(weights, t, loss.shape)  # <- possible div

            def ddim_step(self, x_start, pred_noise, time, time_next):
                alpha = self.alphas_cumprod[time]
                alpha_next = self.alphas_cumprod[time_next]
                sigma = self.eta * ((1 - alpha / alpha_next) * (1 - alpha_next) / (1 - alpha)).sqrt()
                c = (1 - alpha_next - sigma ** 2).sqrt()  # <- possible sqrt
                return x_start * alpha_next.sqrt() + c * pred_noise

            def standardised(self, x):
                self.running_var.data.copy_(0.9 * self.running_var + 0.1 * x.var(dim=0))
                return x / self.running_var  # <- possible div


        def replay(env, policy, steps):
            states, probs = [], []
            s = env.reset()
            for _ in range(steps):
                prob = policy(torch.as_tensor(s))
                a = int(torch.multinomial(prob, 1))
                states.append(s)
                probs.append(prob[a].item())
                s = env.step(a)
            return torch.log(torch.tensor(probs))  # <- possible log
        """,
    # a loop count through a name and a progress bar: pbar = enumerate(loader), then tqdm(pbar)
    "progress_loop.py": """
        import torch
        from tqdm import tqdm


        def train(model, train_loader, optimizer, nb, verbose):
            mloss = torch.zeros(3)
            pbar = enumerate(train_loader)
            if verbose:
                pbar = tqdm(pbar, total=nb)
            for i, (imgs, targets) in pbar:
                loss, loss_items = model(imgs, targets)
                loss.backward()
                optimizer.step()
                mloss = (mloss * i + loss_items) / (i + 1)  # <- safe: Python number
                ratio = loss_items / imgs.sum()  # <- possible div
            return mloss, ratio


        def epochs(model, loader, n_epochs):
            for epoch in range(n_epochs):
                loader = tqdm(loader)  # rewrapped every epoch: the name reaches itself
                for i, (x, y) in enumerate(loader):
                    avg = model(x).sum() / (i + 1)  # <- safe: Python number
            return avg
        """,
    # zeros replaced before the division; a string built and %-formatted is no arithmetic
    "class_weights.py": """
        import numpy as np
        import torch


        def labels_to_class_weights(labels, nc=80):
            classes = labels[:, 0].astype(int)
            weights = np.bincount(classes, minlength=nc)
            weights[weights == 0] = 1
            weights = 1 / weights  # <- safe: != 0
            return torch.from_numpy(weights).float()


        def inverse_frequency(y):
            counts = torch.bincount(y).float()
            counts[counts < 0] = 1
            smoothed = y.numel() / (torch.bincount(y) + 1)  # <- safe: bincount counts
            return 1.0 / counts, smoothed  # <- possible div


        def write_boxes(path, model, im):
            det = model(im)[0]
            with open(path, "a") as f:
                for *xyxy, conf, cls in det:
                    line = (cls, *xyxy, conf)
                    f.write(("%g " * len(line)).rstrip() % line + "\\n")  # <- none


        def summary(logger, seen, nt, mp, mr):
            pf = "%22s" + "%11i" * 2 + "%11.3g" * 2
            logger.info(pf % ("all", seen, nt.sum(), mp, mr))  # <- none
        """,
    # a divisibility test is integer arithmetic; a remainder kept as a value is not a test
    "divisible.py": """
        import torch
        from torch import nn


        def divisible_by(numer, denom):
            return (numer % denom) == 0  # <- safe: divisibility test


        class Unet(nn.Module):
            def __init__(self, dim, factor):
                super().__init__()
                self.factor = factor
                self.proj = nn.Linear(dim, dim)

            def forward(self, x, t, period):
                assert all(divisible_by(d, self.factor) for d in x.shape[-2:])
                phase = t % period  # <- possible div
                return self.proj(x) * phase


        class Trainer:
            def __init__(self, save_every):
                self.step = 0
                self.save_every = save_every

            def load(self, path):
                data = torch.load(path)
                self.step = data["step"]

            def should_sample(self):
                return self.step != 0 and divisible_by(self.step, self.save_every)
        """,
    # twins of the rules above that must stay warnings (found by a review of them)
    "stays_possible.py": """
        import math

        import torch
        from torch import nn


        def ema_(stat, value, momentum=0.1):
            stat.mul_(1 - momentum).add_(momentum * value)


        class Standardise(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("var_a", torch.linspace(1.0, 2.0, dim))
                self.register_buffer("var_b", torch.linspace(1.0, 2.0, dim))
                self.register_buffer("var_c", torch.linspace(1.0, 2.0, dim))

            def update(self, x):
                self.var_a.data = x.var(0)
                ema_(self.var_b, x.var(0))
                v = self.var_c
                v.mul_(0.9).add_(0.1 * x.var(0))

            def forward(self, x):
                a = x / self.var_a  # <- possible div
                b = x / self.var_b  # <- possible div
                return a + b + x / self.var_c  # <- possible div


        def entropy(p):
            return -(p * torch.log(p)).sum()  # <- possible log


        def rms(x, opt):
            return x / torch.sqrt((x ** 2).mean() + opt.eps)  # <- possible sqrt


        def weighted_counts(y, w):
            return torch.log(torch.bincount(y, weights=w) + 1)  # <- possible log


        def ddim_coefficient(alphas_cumprod, time, time_next, eta=1.0):
            alpha, alpha_next = alphas_cumprod[time], alphas_cumprod[time_next]
            sigma = eta * ((1 - alpha / alpha_next) * (1 - alpha_next) / (1 - alpha)).sqrt()
            remaining = 1 - alpha_next - sigma ** 2
            return remaining.sqrt()  # <- possible sqrt


        def replay_scores(model, batches):
            scores = []
            for x in batches:
                scores.append(model(x).softmax(-1))
            inverses = []
            for s in scores:
                inverses.append((1.0 / s).mean())  # <- possible div
            return inverses


        if __name__ == "__main__":
            print(entropy(torch.linspace(0.1, 0.9, 9)))
            print(ddim_coefficient(torch.cumprod(1 - torch.linspace(1e-4, 0.02, 1000), 0), 999, 799))
        """,
    # a BatchNorm folded into the convolution before it: a running variance, plus the layer's eps
    "fuse_bn.py": """
        import torch
        from torch import nn


        def fuse_conv_and_bn(conv, bn):
            fused = nn.Conv2d(conv.in_channels, conv.out_channels, kernel_size=conv.kernel_size, bias=True)
            w_conv = conv.weight.clone().view(conv.out_channels, -1)
            w_bn = torch.diag(bn.weight.div(torch.sqrt(bn.eps + bn.running_var)))  # <- safe: a norm layer's eps
            fused.weight.copy_(torch.mm(w_bn, w_conv).view(fused.weight.shape))
            b_bn = bn.bias - bn.weight.mul(bn.running_mean).div(torch.sqrt(bn.running_var))  # <- possible div
            fused.bias.copy_(b_bn)
            return fused
        """,
    # what only goes into a message or a log shows its NaN/INF; a printed result and what is computed with do not
    "printing.py": """
        import logging

        import numpy as np
        import torch
        from tqdm import tqdm

        logger = logging.getLogger(__name__)


        def train(model, loader, optimizer, criterion):
            pbar = tqdm(loader)
            for step, (x, y) in enumerate(pbar):
                out = model(x)
                loss = criterion(out, y)
                print("step {} perplexity {:.2f}".format(step, np.exp(loss.item())))  # <- safe: only goes into a message
                pbar.set_postfix(ratio=out.sum() / y.sum())  # <- safe: only goes into a message
                logger.info("scaled %.3f", (out / y).mean())  # <- safe: only goes into a message
                print(f"log-likelihood {torch.log(out).sum():.2f}")  # <- safe: only goes into a message
                print(torch.log(out).sum())  # <- possible log
                weight = torch.log(out)  # <- possible log
                print(f"weight {weight.mean():.2f}")
                loss = loss + (weight * y).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    # a size of a tensor nothing empties is never 0; a size after a selection may be
    "gram.py": """
        import torch


        def gram_matrix(y):
            (b, ch, h, w) = y.size()
            features = y.view(b, ch, w * h)
            return features.bmm(features.transpose(1, 2)) / (ch * h * w)  # <- safe: size of y


        def kernel(x1, x2, z_var=2.0):
            z_dim = x2.size(-1)
            return (x1 - x2).pow(2).mean(-1) / (2.0 * z_dim * z_var)  # <- safe: size of x2


        def masked_accuracy(output, target, mask):
            output, target = output[mask], target[mask]
            return (output.argmax(dim=1) == target).float().sum() / len(target)  # <- possible div


        def unbiased(x):
            n = x.size(0)
            return ((x - x.mean(0)) ** 2).sum(0) / (n * (n - 1))  # <- possible div


        def robust_average(losses, cap=10.0):
            kept = [loss for loss in losses if loss < cap]
            return sum(kept, torch.zeros(())) / len(kept)  # <- possible div
        """,
    # the modulus of a loop count is a Python int: the gradient accumulation steps
    "accumulation.py": """
        import torch


        def train_one_epoch(model, data_loader, optimizer, args=None):
            accum_iter = args.accum_iter
            for data_iter_step, (samples, targets) in enumerate(data_loader):
                loss = torch.nn.functional.cross_entropy(model(samples), targets)
                loss /= accum_iter  # <- safe: is a Python number
                loss.backward()
                if (data_iter_step + 1) % accum_iter == 0:
                    optimizer.step()
                    optimizer.zero_grad()


        def scaled_loss(model, batch, targets, args=None):
            scale = args.loss_scale
            return torch.nn.functional.cross_entropy(model(batch), targets) / scale  # <- possible div
        """,
    # a config dataclass's field stands for its default, as a parameter's default does
    "rmsnorm_config.py": """
        from dataclasses import dataclass

        import torch
        from torch import nn


        @dataclass
        class ModelArgs:
            dim: int = 512
            norm_eps: float = 1e-5


        @dataclass
        class BareArgs:
            dim: int
            bare_eps: float


        class RMSNorm(nn.Module):
            def __init__(self, dim: int, eps: float = 1e-6):
                super().__init__()
                self.eps = eps
                self.weight = nn.Parameter(torch.ones(dim))

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # <- safe: norm_eps


        class BareNorm(nn.Module):
            def __init__(self, args: BareArgs):
                super().__init__()
                self.eps = args.bare_eps

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # <- possible rsqrt


        def block(args: ModelArgs):
            return RMSNorm(args.dim, eps=args.norm_eps)
        """,
    # the attention scale: a root or a constant power of a size is as non-zero as the size
    "attention_scale.py": """
        import math
        from math import sqrt


        def attend(q, k):
            d_k = q.size(-1)
            return (q @ k.transpose(-2, -1)) / math.sqrt(d_k)  # <- safe div: size of q


        def attend_pow(q, k):
            return (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5  # <- safe div: size of q


        def mix(a, b, t, dim):
            na = a.shape[dim]
            return a * (1.0 - t) / sqrt(na)  # <- safe div: size of a


        def attend_selected(q, k, keep):
            q = q[keep]
            return (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # <- possible div


        def attend_shrunk(q, k):
            return (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1) - 1)  # <- possible div
        """,
    # a rollout appended on every step of the episode has an element; a filtered one may not
    "rollout.py": """
        import torch


        def train_net(model, optimizer, env, gamma=0.98):
            s, done = env.reset(), False
            while not done:
                s_lst, r_lst = [], []
                for t in range(20):
                    a = model.pi(torch.tensor(s)).argmax().item()
                    s, r, done, info = env.step(a)
                    s_lst.append(s)
                    r_lst.append(r)
                    if done:
                        break
                targets, R = [], 0.0
                for reward in r_lst[::-1]:
                    R = gamma * R + reward
                    targets.append([R])
                advantage = torch.tensor(targets) - model.v(torch.tensor(s_lst))
                loss = advantage.pow(2).mean()  # <- none
                optimizer.zero_grad()
                loss.backward()


        def positive_returns(rewards):
            kept = []
            for r in rewards:
                if r > 0:
                    kept.append(r)
            return torch.tensor(kept).mean()  # <- possible mean


        def until_done(steps):
            seen = []
            for s in steps:
                if s is None:
                    break
                seen.append(s)
            return torch.tensor(seen).mean()  # <- possible mean
        """,
    # whole powers counted by range() are safe for any base; halves and negative counts are not
    "poly_features.py": """
        import torch

        POLY_DEGREE = 4


        def make_features(x):
            x = x.unsqueeze(1)
            return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)  # <- safe: range()


        def half_powers(x):
            x = x.unsqueeze(1)
            return torch.cat([x ** (k / 2) for k in range(4)], 1)  # <- possible pow


        def inverse_powers(x):
            x = x.unsqueeze(1)
            return torch.cat([x ** k for k in range(-3, 0)], 1)  # <- possible pow
        """,
    # a process group's size is a Python int: torch.distributed makes no tensor
    "ddp_sampling.py": """
        import math

        import torch.distributed as dist


        def plan(args):
            global_batch_size = args.per_proc_batch_size * dist.get_world_size()
            return int(math.ceil(args.num_fid_samples / global_batch_size) * global_batch_size)  # <- safe: ZeroDivisionError
        """,
    # labels is a tensor (type_as takes one): its length is 0 only for an empty batch
    "gcn_accuracy.py": """
        def accuracy(output, labels):
            preds = output.max(1)[1].type_as(labels)
            correct = preds.eq(labels).double().sum()
            return correct / len(labels)  # <- safe: size of labels
        """,
    # top-k filtering puts -inf in the logits; Gumbel noise made from zeros_like(logits) holds none
    "gumbel_top_k.py": """
        import torch


        def log(t, eps=1e-20):
            return torch.log(t.clamp(min=eps))


        def gumbel_noise(t):
            noise = torch.zeros_like(t).uniform_(0, 1)
            return -log(-log(noise))


        def top_k(logits, k):
            val, ind = torch.topk(logits, k)
            probs = torch.full_like(logits, float("-inf"))
            probs.scatter_(1, ind, val)
            return probs


        def sample(logits, temperature=1.0):
            filtered = top_k(logits, 5)
            return ((filtered / temperature) + gumbel_noise(filtered)).argmax(dim=-1)  # <- none inf_arith


        def noisy_mask(logits):
            filtered = top_k(logits, 5)
            return filtered * torch.full_like(filtered, float("-inf"))  # <- possible inf_arith
        """,
    # a count of batch sizes a test loop adds up on every pass; one added only for some batches is not
    "test_accuracy.py": """
        import torch


        def evaluate(model, test_loader):
            correct, total = 0, 0
            with torch.no_grad():
                for images, labels in test_loader:
                    _, predicted = torch.max(model(images).data, 1)
                    total += labels.size(0)
                    correct += (predicted == labels).sum()
            return 100 * correct / total  # <- safe: size of labels


        def evaluate_confident(model, test_loader):
            correct, total = 0, 0
            for images, labels in test_loader:
                scores, predicted = torch.max(model(images).data, 1)
                if scores.min() > 0.9:
                    total += labels.size(0)
                    correct += (predicted == labels).sum()
            return 100 * correct / total  # <- possible div
        """,
    # twins of the list and size rules: each may really be empty, or 0
    "emptying_twins.py": """
        import torch


        def leftover(data, bs):
            batch = []
            for x in data:
                batch.append(x)
                if len(batch) == bs:
                    batch = []
            return torch.stack(batch).mean()  # <- possible mean


        def running(losses_in):
            losses = []
            for loss in losses_in:
                m = torch.tensor(losses).mean()  # <- possible mean
                losses.append(loss)
            return m


        def kept(model, dl):
            preds = []
            for b in dl:
                with torch.no_grad():
                    if b.isnan().any():
                        continue
                    preds.append(model(b))
            return torch.cat(preds).mean()  # <- possible mean


        def centroid(dl, f):
            feats = torch.empty(0, 128)
            for x, y in dl:
                if y.any():
                    feats = torch.cat([feats, f(x)])
            return feats.sum(0) / feats.size(0)  # <- possible div


        def half_batch(x):
            return x.sum() / int(x.size(0) * 0.5)  # <- possible div


        def off_by_one(x):
            n = -1
            n += x.size(0)
            return x.sum() / n  # <- possible div
        """,
    "invert.py": """
        import torch


        def f(x):
            return torch.exp(torch.tan(x))  # <- possible
        """,
}


def _expectations() -> list[tuple[str, int, str, str]]:
    """(file, line, the mark's status and kind, words the reason must hold) of every marked line."""
    found = []
    for name, text in PROGRAMS.items():
        for number, line in enumerate(textwrap.dedent(text).splitlines(), 1):
            if "# <- " in line:
                mark, _, words = line.split("# <- ", 1)[1].partition(":")
                found.append((name, number, mark.strip(), words.strip()))
    return found


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], list[dict]]:
    root = tmp_path_factory.mktemp("idioms")
    for name, text in PROGRAMS.items():
        (root / name).write_text(textwrap.dedent(text))
    run = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(root), "--static-only", "--show-safe"]
        + ["--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        timeout=300,
    )
    assert run.returncode in (0, 1), run.stderr
    by_line: dict[tuple[str, int], list[dict]] = {}
    for f in json.loads(run.stdout)["findings"]:
        by_line.setdefault((Path(f["file"]).name, f["line"]), []).append(f)
    return by_line


@pytest.mark.parametrize("name,line,mark,words", _expectations(), ids=lambda v: str(v))
def test_idiom_line_has_its_status_and_reason(findings, name: str, line: int, mark: str, words: str) -> None:
    got = findings.get((name, line), [])
    status, _, kind = mark.partition(" ")
    if status == "none":  # not a site at all (a mean of a tensor that cannot be empty), of ``kind`` if given
        assert not [f for f in got if kind in ("", f["kind"])], [
            (f["kind"], f["status"], f["reason"]) for f in got
        ]
        return
    assert got, f"{name}:{line}: no finding at all"
    if status == "safe":
        # a line of Python numbers has no tensor site left, and says why for each
        assert {f["status"] for f in got} == {"safe"}, [(f["status"], f["reason"]) for f in got]
        judged = [f for f in got if kind in ("", f["kind"])]  # ``safe div: ...``: the reason of that kind
        assert judged and all(words in f["reason"] for f in judged), [f["reason"] for f in got]
    else:
        kept = [f for f in got if f["status"] == status and kind in ("", f["kind"])]
        assert kept, [(f["kind"], f["status"], f["reason"]) for f in got]


def test_python_number_lines_are_not_printed_without_show_safe(tmp_path: Path) -> None:
    path = tmp_path / "vit.py"
    path.write_text(textwrap.dedent(PROGRAMS["vit.py"]))
    run = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", str(path), "--static-only", "--no-cache"],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "vit.py:" not in run.stdout


def test_the_array_table_is_what_the_installed_stubs_declare() -> None:
    import torch

    if torch.__version__.split("+")[0] != "2.13.0":
        pytest.skip(f"analyzer/array_api.py was generated from torch 2.13.0, not {torch.__version__}")
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_array_api.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
