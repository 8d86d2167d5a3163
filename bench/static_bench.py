"""Throughput and memory of the static pass (prints figures; asserts nothing).

    python bench/static_bench.py [--repeat N]

* time for a realistic 2,000-line PyTorch file (modules with hand-written
  layer norms, attention, VAE/cross-entropy/IoU losses): start-up (first call,
  imports included) and the best of N warm runs, split into parse / dataflow /
  sites+ranges;
* the same 2,000 lines as a Jupyter notebook (one code cell per block, a markdown cell and an
  output between them): reading the notebook (JSON, cells, magics) and the static pass on its
  script, warm, as ``grist-lsp --check notebook.ipynb --static-only`` runs them;
* peak traced memory (tracemalloc) for 1k/2k/5k/10k/50k-line files, and the
  peak per line, to show linear growth.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

BLOCK = """
class Block{i}(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.eps = eps
        self.scale = dim ** -0.5

    def forward(self, x, mask=None):
        h = self.fc(x)
        mean = h.mean(-1, keepdim=True)
        var = ((h - mean) ** 2).mean(-1, keepdim=True)
        h = (h - mean) / torch.sqrt(var + self.eps)
        attn = (h @ h.transpose(-1, -2)) * self.scale
        if mask is not None:
            attn = attn.masked_fill(mask, float("-inf"))
        p = F.softmax(attn, dim=-1)
        ent = -(p * torch.log(p + 1e-10)).sum(-1)
        return h / h.norm(dim=-1, keepdim=True), ent


def loss_{i}(logits, y, mu, logvar):
    p = torch.softmax(logits, dim=-1)
    ce = -(y * torch.log(p)).sum(-1).mean()
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    std = torch.exp(0.5 * logvar)
    iou = _inter_{i}(mu, std) / (mu.abs().sum() + EPS)
    return ce + kl + iou.log()


def _inter_{i}(a, b):
    w = (a - b).clamp(min=0)
    return w[..., 0] * w[..., 1] / math.sqrt(2.0)
"""
HEAD = '''"""Generated benchmark module."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-8
'''


def generate(lines: int) -> str:
    """A realistic module of about ``lines`` lines (never more)."""
    parts = [HEAD]
    n = HEAD.count("\n")
    per = BLOCK.count("\n")
    i = 0
    while n + per <= lines:
        parts.append(BLOCK.format(i=i))
        n += per
        i += 1
    parts.append("\n" * (lines - n))
    return "".join(parts)


def generate_notebook(lines: int) -> str:
    """``generate(lines)`` as an nbformat 4 notebook: the head and each block a code cell (with an
    output), a markdown cell before each block, written as Jupyter writes it."""
    text = generate(lines)
    chunks = text.split("\nclass ")
    sources = [chunks[0]] + ["class " + chunk for chunk in chunks[1:]]
    cells = []
    for k, source in enumerate(sources):
        if k:
            cells.append(
                {"cell_type": "markdown", "id": f"m{k}", "metadata": {}, "source": [f"## Block {k}"]}
            )
        lines_of = source.splitlines(keepends=True)
        cells.append(
            {
                "cell_type": "code",
                "execution_count": k + 1,
                "id": f"c{k}",
                "metadata": {},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": [f"block {k} defined\n"]}],
                "source": lines_of,
            }
        )
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def notebook_figures(repeat: int) -> None:
    """The static pass on a 2,000-line notebook: reading it, then analysing its script."""
    from grist_lsp.analyzer.analysis import analyze_source
    from grist_lsp.notebooks import read_notebook

    raw = generate_notebook(2000)
    notebook = read_notebook("bench.ipynb", raw)
    code_lines = notebook.script.count("\n")
    verdicts = analyze_source("bench.ipynb", notebook.script)
    best_read = best_total = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        notebook = read_notebook("bench.ipynb", raw)
        read = time.perf_counter() - t
        analyze_source("bench.ipynb", notebook.script)
        best_read = min(best_read, read)
        best_total = min(best_total, time.perf_counter() - t)
    print(
        f"2,000-line notebook ({len(notebook.cells)} code cells, {code_lines:,} lines of code, "
        f"{len(raw) / 1024:,.0f} KiB of JSON): {len(verdicts)} sites"
    )
    print(
        f"  warm, best of {repeat}: {best_total * 1000:8.1f} ms wall in all "
        f"(reading the notebook {best_read * 1000:.1f} ms, static pass on its script "
        f"{(best_total - best_read) * 1000:.1f} ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    text = generate(2000)
    t0 = time.perf_counter()
    from grist_lsp.analyzer.analysis import analyze_source
    from grist_lsp.analyzer.dataflow import build_dataflow
    from grist_lsp.analyzer.parsing import parse

    verdicts = analyze_source("bench.py", text)
    first = time.perf_counter() - t0
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status.value] = counts.get(v.status.value, 0) + 1
    print(f"2,000-line file: {len(verdicts)} sites {counts}")
    print(f"  first call (imports + analysis): {first * 1000:8.1f} ms")

    best = cpu = parse_t = flow_t = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        c = time.process_time()
        analyze_source("bench.py", text)
        best = min(best, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
        t = time.process_time()
        tree = parse(text)
        parse_t = min(parse_t, time.process_time() - t)
        t = time.process_time()
        build_dataflow(tree)
        flow_t = min(flow_t, time.process_time() - t)
    print(
        f"  warm, best of {args.repeat}:             {best * 1000:8.1f} ms wall, {cpu * 1000:.1f} ms CPU  "
        f"({2000 / best:,.0f} lines/s wall)"
    )
    try:
        import os

        print(
            f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: wall time includes waiting)"
        )
    except OSError:
        pass
    print(
        f"    CPU: parse (ast) {parse_t * 1000:.1f} ms, dataflow {flow_t * 1000:.1f} ms, "
        f"sites + ranges + verdicts {max(cpu - parse_t - flow_t, 0) * 1000:.1f} ms"
    )

    notebook_figures(args.repeat)

    print("peak traced memory (tracemalloc) by file size:")
    for lines in (1_000, 2_000, 5_000, 10_000, 50_000):
        src = generate(lines)
        tracemalloc.start()
        t = time.perf_counter()
        out = analyze_source("bench.py", src)
        elapsed = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"  {lines:>6,} lines: peak {peak / 2**20:7.1f} MiB  ({peak / lines / 1024:5.1f} KiB/line), "
            f"{len(out):>6,} sites, {elapsed:6.2f} s under tracemalloc"
        )


if __name__ == "__main__":
    main()
