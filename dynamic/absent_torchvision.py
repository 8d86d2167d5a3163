"""torchvision where it is not installed: its classic datasets as synthetic images of their real
shape, and the transforms tutorials chain after them.

Tutorials, and GRIST's own subjects, load MNIST or CIFAR through torchvision. The machine that
checks them (CI, a slim container, a torch build torchvision has no wheel for) often lacks
torchvision, and has neither the data nor the network to download it, so the program stopped at
its first import. Its NaN bugs sit in the model and the loss, not in the pixels, and the search
moves the images anyway: here ``torchvision.datasets.MNIST`` and its kin are datasets of the real
length, item shape, pixel range and classes, whose pixels and labels are drawn at random (the
same for every run, so a witness replays). ``transforms`` offers the common ones (``ToTensor``,
``Normalize``, ``Compose``, flips, crops, resizes); ``utils`` (``save_image``, ``make_grid``)
only draws. Anything else of torchvision fails where the program uses it, saying so; the check
says that the data was synthetic (``failures.stand_in_note``, which imports no torch: the
check's own process never does).

Items come out as a real torchvision's do from its PIL images: the first torch op that meets
them is the program's own or the DataLoader's collate, so the engine sees them as inputs of the
batch (``tracing``). Pixels are numpy arrays until ``ToTensor``, and a ``Compose`` keeps them in
numpy to its end; no torch call is made here, so none is traced as the program's.

Installed by ``stand_in_for_absent_packages``, with the drawing packages' stand-ins, in every
child of the engine (last on ``sys.meta_path``: an installed torchvision is always the real one).
Not in ``reproducer_runtime``: a plain reproducer carries that inline and needs no grist-lsp, so
it runs a program that imports torchvision where torchvision is installed.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .reproducer_runtime import stand_in_for_absent_display

BLOCK = 1024  # images drawn together: a dataset's pixels are made one block at a time, as read


@dataclass(frozen=True)
class DatasetShape:
    """What a torchvision dataset holds: item shape as its arrays store it, classes, lengths."""

    shape: tuple[int, ...]  # (H, W) grey, (H, W, 3) colour
    classes: int
    train: int
    test: int
    tensor_data: bool  # ``.data`` / ``.targets`` are tensors (the MNIST family), else numpy / list


_GREY = DatasetShape((28, 28), 10, 60_000, 10_000, tensor_data=True)
DATASETS: dict[str, DatasetShape] = {
    "MNIST": _GREY,
    "FashionMNIST": _GREY,
    "KMNIST": _GREY,
    "CIFAR10": DatasetShape((32, 32, 3), 10, 50_000, 10_000, tensor_data=False),
    "CIFAR100": DatasetShape((32, 32, 3), 100, 50_000, 10_000, tensor_data=False),
    "SVHN": DatasetShape((32, 32, 3), 10, 73_257, 26_032, tensor_data=False),
}


def _absent(what: str) -> AttributeError:
    return AttributeError(
        f"{what}: torchvision is not installed here, and grist-lsp stands in only for its datasets "
        f"{', '.join(DATASETS)}, the transforms {', '.join(TRANSFORMS)} and utils; "
        "install torchvision (and its data) to check this program"
    )


class SyntheticDataset(torch.utils.data.Dataset):
    """A torchvision dataset's stand-in: random uint8 images of its shape, random labels."""

    name = "dataset"

    def __init__(
        self,
        root: Any = None,
        train: bool = True,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        download: bool = False,
        split: str | None = None,
        **_: Any,
    ) -> None:
        self.root, self.transform, self.target_transform = root, transform, target_transform
        self.train = train if split is None else split == "train"
        self.shape = DATASETS[self.name]
        self.length = self.shape.train if self.train else self.shape.test
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.classes = [str(c) for c in range(self.shape.classes)]

    def _block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        if b not in self._blocks:
            count = min(BLOCK, self.length - b * BLOCK)
            rng = np.random.default_rng([zlib.crc32(self.name.encode()), int(self.train), b])
            images = rng.integers(0, 256, (count, *self.shape.shape), dtype=np.uint8)
            labels = rng.integers(0, self.shape.classes, count, dtype=np.int64)
            self._blocks[b] = (images, labels)
        return self._blocks[b]

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> tuple[Any, Any]:
        i = int(index)
        if not -self.length <= i < self.length:
            raise IndexError(f"index {i} is out of range for {self.name} of length {self.length}")
        i %= self.length
        images, labels = self._block(i // BLOCK)
        image: Any = images[i % BLOCK].copy()
        target: Any = int(labels[i % BLOCK])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def _all(self) -> tuple[np.ndarray, np.ndarray]:
        blocks = [self._block(b) for b in range((self.length + BLOCK - 1) // BLOCK)]
        return np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])

    @property
    def data(self) -> Any:
        images = self._all()[0]
        return torch.from_numpy(images) if self.shape.tensor_data else images

    @property
    def targets(self) -> Any:
        labels = self._all()[1]
        return torch.from_numpy(labels) if self.shape.tensor_data else labels.tolist()

    # The names older torchvision gave them, which the classic tutorials still read
    # (``test_data.test_data[:2000] / 255.``, ``test_data.test_labels``).
    train_data = test_data = data
    train_labels = test_labels = targets


def dataset_class(name: str) -> type[SyntheticDataset]:
    """The stand-in for ``torchvision.datasets.<name>`` (one of ``DATASETS``)."""
    return type(name, (SyntheticDataset,), {"name": name})


# --- transforms: numpy in, a tensor out of ToTensor -------------------------------------------


class _Pending:
    """A ToTensor result still inside a Compose: float32 CHW numpy, a tensor at the Compose's end."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _chw(image: Any) -> np.ndarray:
    if isinstance(image, torch.Tensor):
        raise TypeError(f"pic should be a PIL Image or ndarray, got {type(image).__name__}")
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[:, :, None]
    scale = 255.0 if array.dtype == np.uint8 else 1.0
    return np.ascontiguousarray(array.transpose(2, 0, 1), dtype=np.float32) / np.float32(scale)


def _tensor(x: Any) -> Any:
    return torch.from_numpy(x.array) if isinstance(x, _Pending) else x


def _image_op(x: Any, op: Callable[[np.ndarray, bool], np.ndarray]) -> Any:
    """``op`` on an image (HWC numpy), a pending CHW array or a CHW tensor (as numpy, then back)."""
    if isinstance(x, _Pending):
        return _Pending(np.ascontiguousarray(op(x.array, True)))
    if isinstance(x, torch.Tensor):
        return torch.from_numpy(np.ascontiguousarray(op(x.detach().numpy(), True)))
    return np.ascontiguousarray(op(np.asarray(x), False))


def _size(size: int | Sequence[int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[-1]))


def _hw(chw: bool) -> tuple[int, int]:
    return (1, 2) if chw else (0, 1)


class ToTensor:
    def _np(self, image: Any) -> _Pending:
        return _Pending(_chw(image))

    def __call__(self, image: Any) -> torch.Tensor:
        return torch.from_numpy(_chw(image))


class Normalize:
    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1, 1, 1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1, 1, 1)

    def _np(self, x: Any) -> Any:
        return _Pending((x.array - self.mean) / self.std) if isinstance(x, _Pending) else self(x)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # As torchvision computes it: torch ops on the tensor the program handed over.
        return (x - torch.as_tensor(self.mean, dtype=x.dtype)) / torch.as_tensor(self.std, dtype=x.dtype)


class Compose:
    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            in_numpy = getattr(t, "_np", None)
            x = in_numpy(x) if in_numpy is not None else t(_tensor(x))
        return _tensor(x)


class Lambda:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, x: Any) -> Any:
        return self.fn(x)


class _Geometric:
    """A transform that moves pixels: the same on an image, a pending array or a tensor."""

    def __call__(self, x: Any) -> Any:
        return _image_op(x, self.apply)

    _np = __call__  # inside a Compose too: a pending array stays one

    def apply(self, a: np.ndarray, chw: bool) -> np.ndarray:
        raise NotImplementedError


class Resize(_Geometric):
    """Nearest-neighbour: the shape is what the program depends on."""

    def __init__(self, size: int | Sequence[int], *_: Any, **__: Any) -> None:
        self.size = size

    def apply(self, a: np.ndarray, chw: bool) -> np.ndarray:
        h_axis, w_axis = _hw(chw)
        h, w = a.shape[h_axis], a.shape[w_axis]
        if isinstance(self.size, int):  # the shorter side becomes size, the aspect kept
            short = min(h, w)
            th, tw = max(1, h * self.size // short), max(1, w * self.size // short)
        else:
            th, tw = _size(self.size)
        rows = np.arange(th) * h // th
        cols = np.arange(tw) * w // tw
        return np.take(np.take(a, rows, axis=h_axis), cols, axis=w_axis)


class CenterCrop(_Geometric):
    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = _size(size)

    def apply(self, a: np.ndarray, chw: bool) -> np.ndarray:
        h_axis, w_axis = _hw(chw)
        top = max(0, (a.shape[h_axis] - self.size[0]) // 2)
        left = max(0, (a.shape[w_axis] - self.size[1]) // 2)
        a = np.take(a, range(top, top + self.size[0]), axis=h_axis)
        return np.take(a, range(left, left + self.size[1]), axis=w_axis)


class RandomCrop(_Geometric):
    def __init__(
        self, size: int | Sequence[int], padding: int | Sequence[int] | None = None, **_: Any
    ) -> None:
        self.size, self.padding = _size(size), padding
        self.rng = np.random.default_rng(0)  # its own: the program's random streams stay untouched

    def apply(self, a: np.ndarray, chw: bool) -> np.ndarray:
        h_axis, w_axis = _hw(chw)
        if self.padding:
            pad = [(0, 0)] * a.ndim
            p = _size(self.padding)
            pad[h_axis], pad[w_axis] = (p[0], p[0]), (p[1], p[1])
            a = np.pad(a, pad)
        top = int(self.rng.integers(0, a.shape[h_axis] - self.size[0] + 1))
        left = int(self.rng.integers(0, a.shape[w_axis] - self.size[1] + 1))
        a = np.take(a, range(top, top + self.size[0]), axis=h_axis)
        return np.take(a, range(left, left + self.size[1]), axis=w_axis)


class RandomHorizontalFlip(_Geometric):
    def __init__(self, p: float = 0.5) -> None:
        self.p = p
        self.rng = np.random.default_rng(0)

    def apply(self, a: np.ndarray, chw: bool) -> np.ndarray:
        return np.flip(a, axis=_hw(chw)[1]) if self.rng.random() < self.p else a


class Grayscale(_Geometric):
    def __init__(self, num_output_channels: int = 1) -> None:
        self.channels = num_output_channels

    def apply(self, a: np.ndarray, chw: bool) -> np.ndarray:
        axis = 0 if chw else 2
        if a.ndim == 2:
            a = a[:, :, None]
        grey = a.mean(axis=axis, keepdims=True).astype(a.dtype)
        return np.repeat(grey, self.channels, axis=axis)


TRANSFORMS: dict[str, type] = {
    t.__name__: t
    for t in (
        ToTensor,
        Normalize,
        Compose,
        Lambda,
        Resize,
        CenterCrop,
        RandomCrop,
        RandomHorizontalFlip,
        Grayscale,
    )
}


def _drawing(*_: Any, **__: Any) -> None:
    """``save_image``, ``make_grid``: only drawn or saved, never read back by the computation."""
    return None


# --- the modules -----------------------------------------------------------------------------


class _Module(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise _absent(f"{self.__name__}.{name}")


SUBMODULES = ("datasets", "transforms", "utils")
MODULES = frozenset({"torchvision", *(f"torchvision.{sub}" for sub in SUBMODULES)})


def _contents(name: str) -> dict[str, Any]:
    """What module ``name`` (one of ``MODULES``) holds."""
    if name == "torchvision.datasets":
        return {n: dataset_class(n) for n in DATASETS}
    if name == "torchvision.transforms":
        return dict(TRANSFORMS)
    if name == "torchvision.utils":
        return {"save_image": _drawing, "make_grid": _drawing}
    return {"__version__": "0.0+grist-stand-in"}


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__.update(_contents(module.__name__))
        if module.__name__ == "torchvision":  # as the real package does: ``torchvision.datasets.MNIST``
            for sub in SUBMODULES:
                setattr(module, sub, importlib.import_module(f"torchvision.{sub}"))


class AbsentTorchvisionFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: reached only when no real torchvision is installed."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in MODULES:
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        if fullname.startswith("torchvision."):
            raise ImportError(str(_absent(fullname)), name=fullname)
        return None


def stand_in_for_absent_packages() -> None:
    """The drawing packages and torchvision, where absent, served by stand-ins in this process."""
    stand_in_for_absent_display()
    if not any(isinstance(f, AbsentTorchvisionFinder) for f in sys.meta_path):
        sys.meta_path.append(AbsentTorchvisionFinder())
