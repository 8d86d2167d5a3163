"""Programs that load MNIST or CIFAR through torchvision, checked where torchvision is not
installed (``dynamic/absent_torchvision.py``): the dataset is synthetic images of its real shape,
the bug in the model is confirmed, its reproducer fails in a fresh process, and the user is told
the data was made up."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from grist_lsp.dynamic import absent_torchvision as tv

pytestmark = pytest.mark.skipif(
    importlib.machinery.PathFinder.find_spec("torchvision") is not None,
    reason="torchvision is installed here: the real one is used, and it would download MNIST",
)

# The classic MNIST tutorial, cross-entropy written out: a confident softmax entry reaches 0.
MNIST_TUTORIAL = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms
from torchvision.utils import save_image

torch.manual_seed(0)
train_set = datasets.MNIST("data", train=True, download=True,
                           transform=transforms.Compose([transforms.ToTensor(),
                                                         transforms.Normalize((0.1307,), (0.3081,))]))
loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=True)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)

for epoch in range(3):
    for images, labels in loader:
        probs = F.softmax(model(images), dim=1)
        loss = -torch.log(probs[range(len(labels)), labels]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_image(images[:16], "samples.png")
"""
LOG_LINE = 18


def test_an_mnist_tutorial_is_confirmed_on_synthetic_images_and_says_so(
    grist_cli, write_tree, run_pytest
) -> None:
    project = write_tree({"mnist.py": MNIST_TUTORIAL})
    res = grist_cli("--check", "mnist.py", "--format", "json", "--write-reproducers", "repro", cwd=project)
    assert res.returncode == 1, res.stdout + res.stderr
    findings = json.loads(res.stdout)["findings"]
    assert not [f for f in findings if f["status"] == "error"], findings
    assert [(f["line"], f["status"]) for f in findings if f["kind"] == "log"] == [(LOG_LINE, "confirmed")]
    assert "torchvision is not installed here" in res.stderr and "synthetic images" in res.stderr, res.stderr
    assert not (project / "data").exists() and not (project / "samples.png").exists()
    repro = run_pytest("repro", cwd=project)
    assert repro.returncode == 1 and "1 failed" in repro.stdout, repro.stdout + repro.stderr


def test_the_checks_own_process_never_imports_torch(tmp_path: Path) -> None:
    # Only the children import torch (once, in the fork server); the note about synthetic data is
    # worked out in the check's own process, from the text, so it must not pull torch in.
    (tmp_path / "mnist.py").write_text(MNIST_TUTORIAL)
    runner = (
        "import sys\n"
        "from grist_lsp.check import check_paths\n"
        "from grist_lsp.service import CheckOptions\n"
        "report = check_paths([sys.argv[1]], CheckOptions(budget=2.0, no_cache=True))\n"
        "print(sorted({v.status.value for v in report.verdicts}), 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", runner, str(tmp_path / "mnist.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert out.stdout.strip() == "['confirmed'] False", out.stdout + out.stderr


def test_what_torchvision_does_not_offer_fails_at_the_programs_line_saying_so(grist_cli, write_tree) -> None:
    program = "import torch\nfrom torchvision import models\nnet = models.resnet18()\nprint(torch.log(torch.rand(3)))\n"
    project = write_tree({"uses_models.py": program})
    res = grist_cli("--check", "uses_models.py", "--format", "json", cwd=project)
    [error] = [f for f in json.loads(res.stdout)["findings"] if f["status"] == "error"]
    assert error["line"] == 2, error
    assert "torchvision is not installed here" in error["message"], error["message"]
    assert "install torchvision" in error["message"], error["message"]


def test_the_datasets_have_the_real_shapes_lengths_and_classes() -> None:
    mnist = tv.DATASETS["MNIST"]
    train, test = _dataset("MNIST", train=True), _dataset("MNIST", train=False)
    assert (len(train), len(test)) == (mnist.train, mnist.test) == (60_000, 10_000)
    image, label = train[59_999]
    assert image.shape == (28, 28) and image.dtype == np.uint8 and 0 <= label < 10
    assert train.data.shape == (60_000, 28, 28) and train.data.dtype == torch.uint8
    assert train.targets.dtype == torch.int64 and int(train.targets.max()) <= 9
    assert np.array_equal(train.data[1234].numpy(), train[1234][0])  # one dataset, however read
    assert torch.equal(test.test_data, test.data) and torch.equal(test.test_labels, test.targets)
    cifar = _dataset("CIFAR100", train=True)
    assert cifar.data.shape == (50_000, 32, 32, 3) and isinstance(cifar.targets, list)
    assert max(cifar.targets) == 99
    with pytest.raises(IndexError):
        train[60_000]


def test_the_package_reaches_its_submodules_as_the_real_one_does(tmp_path: Path) -> None:
    program = tmp_path / "cifar.py"
    program.write_text(
        "import torchvision\n"
        "import torchvision.transforms as T\n"
        "ds = torchvision.datasets.CIFAR10('data', transform=T.ToTensor())\n"
        "print(tuple(ds[0][0].shape), len(ds))\n"
    )
    runner = (
        "import runpy, sys\n"
        "from grist_lsp.dynamic.absent_torchvision import stand_in_for_absent_packages\n"
        "stand_in_for_absent_packages()\n"
        "runpy.run_path(sys.argv[1])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", runner, str(program)], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "(3, 32, 32) 50000", out.stderr


def test_transforms_give_what_torchvisions_give() -> None:
    image, _ = _dataset("CIFAR10", train=True)[7]
    tensor = tv.ToTensor()(image)
    assert tensor.shape == (3, 32, 32) and tensor.dtype == torch.float32
    assert torch.equal(tensor, torch.from_numpy(image).permute(2, 0, 1).float() / 255)
    normalise = tv.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    chained = tv.Compose([tv.RandomCrop(28, padding=2), tv.ToTensor(), normalise])(image)
    assert chained.shape == (3, 28, 28)
    direct = tv.Compose([tv.ToTensor(), normalise])(image)
    assert torch.allclose(direct, normalise(tensor))
    assert tv.Compose([tv.Resize(64), tv.Grayscale(), tv.ToTensor()])(image).shape == (1, 64, 64)
    assert tv.Compose([tv.CenterCrop(16), tv.ToTensor()])(image).shape == (3, 16, 16)


def _dataset(name: str, train: bool) -> tv.SyntheticDataset:
    return tv.dataset_class(name)(str(Path("nowhere")), train=train, download=True)
