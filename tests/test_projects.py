"""Whole projects checked with `grist-lsp --check`, as a user runs it: scripts that cannot run end
as one clear line each (with an `error_kind`), script arguments from `[tool.grist] script-args`
and `--script-args` reach the script (and its reproducer), a test file is checked through its own
tests, and a GPT-style module built from a config dataclass is probed at small sizes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from grist_lsp.dynamic.configs import constructor_args, constructor_source, constructor_text, small_int
from grist_lsp.model import ERROR_KINDS

Cli = Callable[..., subprocess.CompletedProcess[str]]

NEEDS_DATA = """import numpy as np
import torch

data = np.load("data/train.npy")
x = torch.from_numpy(data).float()
print(torch.log(x).sum())
"""
NEEDS_EPOCHS = """import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, required=True)
args = parser.parse_args()

x = torch.randn(8, 4)
w = torch.randn(4, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for epoch in range(args.epochs):
    p = torch.sigmoid(x @ w)
    loss = -(torch.log(p)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
NEEDS_GPU = """import torch

if not torch.cuda.is_available():
    raise SystemError("no CUDA device")
torch.cuda.set_device(0)
print(torch.log(torch.randn(4)))
"""
NEEDS_DISTRIBUTED = """import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo")
print(torch.log(torch.randn(4)))
"""
NEEDS_NETWORK = """import urllib.request

import torch

urllib.request.urlretrieve("http://weights.invalid/model.pt", "model.pt")
print(torch.log(torch.load("model.pt")))
"""
WAITS_FOR_RANKS = """import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("gloo", rank=0, world_size=2)
print(torch.log(torch.randn(4)))
"""
TEST_ENTROPY = """import torch


def masked_entropy(scores, keep):
    p = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return -(p * torch.log(p)).sum(-1)


def test_entropy():
    scores = torch.randn(3, 5)
    keep = torch.rand(3, 5) > 0.5
    h = masked_entropy(scores, keep)
    assert h.shape == (3,)
"""
GPT = """from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.attn = nn.MultiheadAttention(config.n_embd, config.n_head, batch_first=True)
        self.ln = nn.LayerNorm(config.n_embd)

    def forward(self, x):
        return x + self.attn(self.ln(x), self.ln(x), self.ln(x), need_weights=False)[0]


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.head = nn.Linear(config.n_embd, config.vocab_size)

    def forward(self, idx):
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        top = torch.softmax(logits, dim=-1).max(-1).values
        return torch.log(top - 0.5)
"""


@pytest.fixture
def cli(grist_cli: Cli) -> Cli:
    """The console script, as conftest runs it (the children import this checkout's grist_lsp)."""
    return grist_cli


def _findings(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return json.loads(result.stdout)["findings"]


def _run_reproducer(path: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The reproducer a check wrote, run by pytest in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _errors(findings: list[dict]) -> dict[str, dict]:
    """File -> its one error finding (the test fails on a file with two)."""
    out: dict[str, dict] = {}
    for f in findings:
        if f["status"] == "error":
            assert f["file"] not in out, f
            out[f["file"]] = f
    return out


@pytest.fixture(scope="module")
def unrunnable(tmp_path_factory: pytest.TempPathFactory, grist_script: str) -> dict[str, object]:
    """A project whose five scripts cannot run here, checked once as text and once as JSON."""
    root = tmp_path_factory.mktemp("unrunnable")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    scripts = {
        "train_data.py": NEEDS_DATA,
        "train_epochs.py": NEEDS_EPOCHS,
        "gpu_only.py": NEEDS_GPU,
        "ddp.py": NEEDS_DISTRIBUTED,
        "download.py": NEEDS_NETWORK,
    }
    for name, text in scripts.items():
        (root / name).write_text(text, encoding="utf-8")
    runs = {}
    for fmt in ("text", "json"):
        runs[fmt] = subprocess.run(
            [grist_script, "--check", ".", "--budget", "0.5", "--timeout", "15", "--format", fmt],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
        )
    return runs


def test_scripts_needing_data_or_arguments_end_as_one_line_each(unrunnable: dict) -> None:
    result = unrunnable["text"]
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = result.stdout.splitlines()
    errors = {line.split(":")[0]: line for line in lines if "[error]" in line}
    assert sorted(errors) == ["ddp.py", "download.py", "gpu_only.py", "train_data.py", "train_epochs.py"]
    data = errors["train_data.py"]
    assert data.startswith(
        "train_data.py:4:1: GRIST000 [error] the program needs the data file data/train.npy"
    )
    assert "--entry" in data and "script-args" in data
    epochs = errors["train_epochs.py"]
    assert epochs.startswith("train_epochs.py:7:1: GRIST000 [error] the program needs command-line arguments")
    assert "the following arguments are required: --epochs" in epochs
    assert '[tool.grist] script-args = {"train_epochs.py" = ["--epochs", "..."]}' in epochs
    assert "--script-args 'train_epochs.py=--epochs ...'" in epochs
    # Each error is one line: the next line is the file's site (still possible), never a traceback.
    for line in errors.values():
        following = lines[lines.index(line) + 1]
        assert "[possible]" in following, following


def test_every_error_says_its_kind_in_json(unrunnable: dict) -> None:
    result = unrunnable["json"]
    assert result.returncode in (0, 1), result.stderr
    findings = _findings(result)
    kinds = {file: f["error_kind"] for file, f in _errors(findings).items()}
    assert kinds == {
        "train_data.py": "missing-data",
        "train_epochs.py": "needs-arguments",
        "gpu_only.py": "needs-gpu",
        "ddp.py": "needs-distributed",
        "download.py": "needs-network",
    }
    assert all(f["error_kind"] is None for f in findings if f["status"] != "error")
    assert set(kinds.values()) <= set(ERROR_KINDS)


def test_a_process_group_waiting_for_its_other_ranks_is_needs_distributed(cli: Cli, tmp_path: Path) -> None:
    # The wait is native and deaf to the worker's own timer: the parent stops the worker, and its
    # stack dump says where it waited.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "ddp_wait.py").write_text(WAITS_FOR_RANKS, encoding="utf-8")
    result = cli(
        "--check", "ddp_wait.py", "--budget", "0.5", "--timeout", "3", "--format", "json", cwd=tmp_path
    )
    assert result.returncode in (0, 1), result.stderr
    error = _errors(_findings(result))["ddp_wait.py"]
    assert error["error_kind"] == "needs-distributed", error["message"]
    assert error["line"] == 8
    assert "--entry" in error["message"] and "script-args" in error["message"]


def test_script_args_from_the_config_reach_the_script_and_its_reproducer(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.grist]\nscript-args = {"train_epochs.py" = ["--epochs", "3"]}\n', encoding="utf-8"
    )
    (tmp_path / "train_epochs.py").write_text(NEEDS_EPOCHS, encoding="utf-8")
    result = cli(
        "--check", "train_epochs.py", "--format", "json", "--write-reproducers", "repro", cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    [log] = [f for f in _findings(result) if f["line"] == 14]
    assert log["status"] == "confirmed", log["reason"]
    assert log["witness"]["entry"] == "script:train_epochs.py"
    assert log["witness"]["argv"] == ["--epochs", "3"]
    # The reproducer runs the script with the same arguments in a fresh process and fails on the
    # NaN/INF (without them, argparse would stop it and it could only error).
    repro = _run_reproducer(log["witness"]["reproducer"], tmp_path)
    assert repro.returncode == 1, repro.stdout
    assert "torch.log produced -inf from finite operands" in repro.stdout, repro.stdout


def test_script_args_on_the_command_line_reach_the_script(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "train_epochs.py").write_text(NEEDS_EPOCHS, encoding="utf-8")
    result = cli(
        "--check",
        "train_epochs.py",
        "--format",
        "json",
        "--script-args",
        "train_epochs.py=--epochs 2",
        cwd=tmp_path,
    )
    [log] = [f for f in _findings(result) if f["line"] == 14]
    assert log["status"] == "confirmed", log["reason"]
    assert log["witness"]["argv"] == ["--epochs", "2"]


@pytest.mark.parametrize(
    "config, flags, words",
    [
        ('script-args = {"nope.py" = ["--epochs", "1"]}', [], '`script-args` "nope.py": no Python file'),
        (
            'script-args = {"train_epochs.py" = ["--epochs", 1]}',
            [],
            "must be a list of strings (numbers quoted)",
        ),
        ('script-args = ["train_epochs.py"]', [], "`script-args` must be a table of script = [arguments]"),
        ("", ["--script-args", "--epochs 1"], "--script-args '--epochs 1': expected FILE.py=ARGS"),
        ("", ["--script-args", "missing.py=--epochs 1"], "no Python file"),
    ],
)
def test_bad_script_args_exit_2_naming_the_key(
    cli: Cli, tmp_path: Path, config: str, flags: list[str], words: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.grist]\n{config}\n", encoding="utf-8")
    (tmp_path / "train_epochs.py").write_text(NEEDS_EPOCHS, encoding="utf-8")
    result = cli("--check", "train_epochs.py", *flags, cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_test_file_is_checked_through_its_own_test(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "test_entropy.py").write_text(TEST_ENTROPY, encoding="utf-8")
    result = cli("--check", "test_entropy.py", "--format", "json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    by_line = {f["line"]: f for f in _findings(result)}
    for line in (5, 6):  # the fully masked softmax row and the log of its 0 probabilities
        assert by_line[line]["status"] == "confirmed", by_line[line]["reason"]
        assert by_line[line]["witness"]["entry"] == "test:test_entropy.py::test_entropy"


def test_a_module_built_from_a_config_dataclass_is_probed_at_small_sizes(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "model.py").write_text(GPT, encoding="utf-8")
    result = cli("--check", "model.py", "--format", "json", "--write-reproducers", "repro", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [log] = [f for f in _findings(result) if f["line"] == 41]
    assert log["status"] == "confirmed", log["reason"]
    entry = log["witness"]["entry"]
    assert entry.startswith("probe:model.py:GPT(GPTConfig(") and entry.endswith("),)"), entry
    assert "n_embd=32" in entry and "vocab_size=32" in entry
    repro = _run_reproducer(log["witness"]["reproducer"], tmp_path)
    assert repro.returncode == 1, repro.stdout
    assert "torch.log at model.py:41" in repro.stdout, repro.stdout


# --- the config's text in a probe label ----------------------------------------------------


@dataclasses.dataclass
class _Config:
    n_head: int = 12
    n_embd: int = 768
    vocab_size: int = -1
    dropout: float = 0.1
    name: str = "gpt"


def test_small_sizes_keep_divisibility_and_the_label_rebuilds_the_same_config() -> None:
    assert small_int(768, False) % small_int(12, False) == 0
    assert small_int(-1, False) == -1 and small_int(-1, True) > 0
    config = _Config(n_head=small_int(12, False), n_embd=small_int(768, False))
    namespace = {"_Config": _Config}
    text = constructor_text((config, 16), namespace)
    assert text == f"(_Config(n_head={config.n_head}, n_embd={config.n_embd}), 16)"
    assert constructor_args(text, namespace) == (config, 16)
    assert (
        constructor_source(text, "program")
        == f"(program._Config(n_head={config.n_head}, n_embd={config.n_embd}), 16)"
    )
    # Only dataclasses of the module and literals: a label naming anything else is refused.
    with pytest.raises(ValueError):
        constructor_args("(__import__('os').getcwd(),)", namespace)


LLAMA_STYLE = """from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch.nn as nn


@dataclass
class ModelArgs:
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: Optional[int] = None
    vocab_size: int = -1  # set from the tokenizer
    multiple_of: int = 256
    norm_eps: float = 1e-5


class Head(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class Transformer(nn.Module):
    def __init__(self, params: ModelArgs):
        super().__init__()
        assert params.dim % params.n_heads == 0
        self.tok = nn.Embedding(params.vocab_size, params.dim)
        self.layers = nn.ModuleList([nn.Linear(params.dim, params.dim) for _ in range(params.n_layers)])

    def forward(self, tokens):
        h = self.tok(tokens)
        for layer in self.layers:
            h = layer(h)
        return h
"""


def test_an_annotated_config_with_a_sentinel_is_made_and_a_plain_width_still_gets_numbers(
    tmp_path: Path,
) -> None:
    from grist_lsp.dynamic.entries import probe_programs

    path = tmp_path / "llama.py"
    path.write_text(LLAMA_STYLE, encoding="utf-8")
    labels = {p.label.split(":", 2)[2] for p in probe_programs(str(path), LLAMA_STYLE, 0)}
    # vocab_size = -1 cannot build an Embedding: the second try gives it a size too.
    assert labels == {
        "Head(16,)",
        "Transformer(ModelArgs(dim=32, n_layers=2, n_heads=2, vocab_size=32, multiple_of=32),)",
    }


SAME_STEM = {
    "pyproject.toml": "[project]\nname = 'two-models'\n",
    "gpt/model.py": "import torch\n\n\ndef entropy(p):\n    return -(p * torch.log(p)).sum()\n",
    "gpt/test_model.py": (
        "import torch\nfrom model import entropy\n\n\n"
        "def test_entropy():\n    assert entropy(torch.rand(4)) >= 0\n"
    ),
    "apps/__init__.py": "",
    "apps/model.py": "def helper():\n    return 1\n",
    # A test of the other `model` module (found first): running it for gpt/model.py would end
    # the worker.
    "apps/tests/test_helper.py": (
        "import os\nfrom apps.model import helper\n\n\ndef test_helper():\n    os._exit(3)\n"
    ),
}


def test_a_test_of_another_module_with_the_same_name_is_not_run(cli: Cli, write_tree) -> None:
    root = write_tree(SAME_STEM)
    res = cli("--check", "gpt/model.py", "--format", "json", cwd=root)
    findings = json.loads(res.stdout)["findings"]
    assert [(f["line"], f["status"], f["kind"]) for f in findings] == [(5, "confirmed", "log")], res.stdout
    assert "gpt/test_model.py" in json.dumps(findings[0]["witness"])


def test_an_import_loads_the_target_only_when_it_resolves_to_it_or_nowhere(write_tree) -> None:
    from grist_lsp.discovery import imports_into

    root = write_tree(SAME_STEM)
    target = root / "gpt" / "model.py"
    cases = {
        "from model import entropy\n": (root / "gpt" / "test_x.py", True),  # its own folder
        "from apps.model import helper\n": (root / "tests" / "test_x.py", False),  # another model.py
        "from os import path\n": (root / "tests" / "test_x.py", False),  # names nothing of it
        # A folder the test puts on sys.path itself: `model` resolves nowhere, so it may be ours.
        "import sys\nsys.path.insert(0, 'gpt')\nimport model\n": (root / "tests" / "test_x.py", True),
    }
    for text, (path, expected) in cases.items():
        assert imports_into(path, text, root, target) is expected, text
