"""Witness values: shrinking a failing input, and tensors <-> ``TensorValue``.

Small tensors (at most ``INLINE_LIMIT`` elements) are stored inline as nested
lists, exactly (float32 values are exact as Python floats). Larger ones go to a
``.pt`` payload named by the hash of its bytes in the payload directory
(``$GRIST_CACHE_DIR`` or ``~/.cache/grist-lsp/payloads``); ``TensorValue.file``
holds its absolute path. Python numbers passed as arguments (``dim=1``) are
stored with dtype ``python:int`` / ``python:float`` / ``python:bool`` and shape ``[]``.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from collections.abc import Callable
from typing import Any

import torch

from grist_lsp.model import TensorValue

INLINE_LIMIT = 256


def payload_dir() -> str:
    from .sandbox import cache_folder  # the sandbox lets children write there

    return os.path.join(cache_folder(), "payloads")


def summary(t: torch.Tensor) -> dict[str, float]:
    if t.numel() == 0 or not (
        torch.is_floating_point(t) or t.dtype in (torch.int64, torch.int32, torch.bool)
    ):
        return {}
    f = t.detach().double()
    fin = f[torch.isfinite(f)]
    if fin.numel() == 0:
        return {}
    return {"min": float(fin.min()), "max": float(fin.max()), "mean": float(fin.mean())}


def to_value(v: Any, directory: str | None = None) -> TensorValue:
    """A TensorValue for a tensor or Python number (payload file for large tensors)."""
    if isinstance(v, bool):
        return TensorValue(shape=[], dtype="python:bool", values=v)
    if isinstance(v, int):
        return TensorValue(shape=[], dtype="python:int", values=v)
    if isinstance(v, float):
        return TensorValue(shape=[], dtype="python:float", values=_json_float(v))
    t = v.detach().cpu()
    dtype = str(t.dtype).replace("torch.", "")
    if t.numel() <= INLINE_LIMIT:
        values = t.tolist()
        if torch.is_floating_point(t):
            values = _map_floats(values)
        return TensorValue(shape=list(t.shape), dtype=dtype, values=values, summary=summary(t))
    buf = io.BytesIO()
    torch.save(t.contiguous().clone(), buf)
    data = buf.getvalue()
    d = directory or payload_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, hashlib.sha256(data).hexdigest()[:24] + ".pt")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return TensorValue(shape=list(t.shape), dtype=dtype, values=None, summary=summary(t), file=path)


def from_value(tv: TensorValue) -> Any:
    """The tensor (or Python number) a TensorValue stands for."""
    if tv.dtype.startswith("python:"):
        kind = tv.dtype.split(":", 1)[1]
        return {"int": int, "float": float, "bool": bool}[kind](tv.values)
    if tv.values is None:
        if not tv.file:
            raise ValueError(
                f"witness value of shape {tv.shape} has neither inline values nor a payload file"
            )
        return torch.load(tv.file, weights_only=True)
    dtype = getattr(torch, tv.dtype)
    values = tv.values
    if dtype.is_floating_point:
        values = _map_floats(values, back=True)
    return torch.tensor(values, dtype=dtype).reshape(tv.shape)


def _json_float(x: float) -> Any:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _map_floats(values: Any, back: bool = False) -> Any:
    """JSON has no NaN/INF: they travel as strings."""
    if isinstance(values, list):
        return [_map_floats(v, back) for v in values]
    if back:
        return float(values) if isinstance(values, str) else values
    return _json_float(values) if isinstance(values, float) else values


def describe(v: Any, limit: int = 8) -> str:
    """Short words for a value: inline when tiny, else shape and range."""
    if not isinstance(v, torch.Tensor):
        return repr(v)
    t = v.detach()
    if t.numel() <= limit:
        return _fmt_list(t.tolist())
    s = summary(t)
    rng = f" in [{_g(s['min'])}, {_g(s['max'])}]" if s else ""
    return f"a {str(t.dtype).replace('torch.', '')} tensor of shape {list(t.shape)}{rng}"


def _g(x: float) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x)) if abs(x) >= 1 or x == 0 else repr(x)
    return f"{x:.4g}"


def _fmt_list(x: Any) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_fmt_list(e) for e in x) + "]"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return _g(x)
    return str(x)


def shrink(
    values: dict[str, Any],
    still_fails: Callable[[dict[str, Any]], bool],
    max_tries: int = 24,
    within: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Smaller, rounder inputs that still fail: one batch row, then coarser rounding. ``within``:
    input key -> the largest magnitude the program gave it; a rounding that would take an input
    in that range out of it (0.9998 to 1) is skipped for a finer one, so that a witness in the
    program's range stays there."""
    tries = 0
    cur = dict(values)
    n = batch_rows(cur)
    if n > 1:
        for i in range(min(n, 8)):
            if tries >= max_tries // 2:
                break
            cand = take_rows(cur, n, i, i + 1)
            tries += 1
            if still_fails(cand):
                cur = cand
                break
    for digits in (0, 1, 2, 4):
        if tries >= max_tries:
            break
        cand = {
            k: (_round(v, digits) if isinstance(v, torch.Tensor) and torch.is_floating_point(v) else v)
            for k, v in cur.items()
        }
        if all(torch.equal(cand[k], cur[k]) for k in cur if isinstance(cur[k], torch.Tensor)):
            break
        if within and any(_leaves(cur[k], cand[k], limit) for k, limit in within.items() if k in cur):
            continue
        tries += 1
        if still_fails(cand):
            cur = cand
            break
    return cur


def batch_rows(values: dict[str, Any]) -> int:
    """The batch size of a run's inputs: the length of dimension 0 most of its tensors share
    (0 when none has one)."""
    sizes = [v.shape[0] for v in values.values() if isinstance(v, torch.Tensor) and v.dim() >= 1]
    return max(set(sizes), key=sizes.count) if sizes else 0


def _rows(values: dict[str, Any], rows: slice, cut: Callable[[int], bool]) -> dict[str, Any]:
    """``rows`` of every input whose length along dimension 0 ``cut`` accepts; the others as they are."""
    return {
        k: v[rows].clone() if isinstance(v, torch.Tensor) and v.dim() >= 1 and cut(v.shape[0]) else v
        for k, v in values.items()
    }


def take_rows(values: dict[str, Any], n: int, start: int, stop: int) -> dict[str, Any]:
    """Rows ``start:stop`` of every input whose batch is ``n`` rows; the others as they are."""
    return _rows(values, slice(start, stop), lambda rows: rows == n)


def first_rows(values: dict[str, Any], count: int) -> dict[str, Any]:
    """The first ``count`` rows of every input that has more (whatever its batch size: a GAN's
    real images and its noise are batches of their own)."""
    return _rows(values, slice(0, count), lambda rows: rows > count)


def _leaves(before: Any, after: Any, limit: float) -> bool:
    """Whether rounding took an input that was within ``limit`` in magnitude past it."""
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor) or not before.numel():
        return False
    return float(before.abs().max()) <= limit < float(after.abs().max())


def _round(v: torch.Tensor, digits: int) -> torch.Tensor:
    """Round to ``digits`` significant decimal digits (0: to integers)."""
    if digits == 0:
        return torch.round(v) + 0.0  # + 0.0 turns -0.0 into 0.0
    mag = torch.floor(torch.log10(v.abs().clamp_min(1e-30)))
    scale = torch.pow(10.0, digits - 1 - mag).to(v.dtype)
    r = torch.round(v * scale) / scale
    return torch.where(v == 0, v, r) + 0.0
