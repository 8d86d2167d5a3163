"""Expectation markers for the example and corpus programs, and an independent oracle.

A marker is a trailing comment on the line of an unsafe op::

    loss = -(onehot * torch.log(probs)).sum(1).mean()  # expect: confirmed log, possible mean

One ``<status> <kind>`` pair per unsafe site on that line (kinds are the
catalogue's: log, div, sqrt, exp, pow, acos, atanh, lgamma, var, mean ...).
When a line holds two sites of the same kind, the pairs are listed in the order
the sites start on the line (outer expression first when they start together).

Statuses:

* ``confirmed``: a real bug; some finite input (or a bounded weight move) drives
  this exact op to NaN/INF. Every one is checked by hand in
  tests/test_corpus_markers.py with an input of our own choosing.
* ``possible``: a real risk the engine may legitimately not reach (e.g. only with
  an empty batch, or an input real data never holds); the comment above the line
  says why. The engine may confirm it or leave it open; both are accepted.
* ``safe``: cannot fail, and the static pass's range facts (clamp, + eps on a
  non-negative value, softmax/sigmoid/exp ranges, safe keywords) prove it.
* ``unproven``: cannot fail either, but only for reasons beyond the static
  range facts (e.g. the exponent of exp is a cosine in [-1, 1]); statically
  ``possible`` is expected, and the engine must never confirm it.

This module also holds ``NonFiniteOracle``: a TorchFunctionMode that records, for
one program file, every catalogue op evaluated with all-finite operands whose
output is not finite (the same oracle DESIGN.md gives the engine). The hand
witnesses use it to prove each ``confirmed`` marker honest without the engine.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grist_lsp.analyzer.catalogue import KINDS, lookup

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
PROGRAMS = REPO / "tests" / "corpus" / "programs"

STATUSES = ("confirmed", "possible", "safe", "unproven")
_MARKER = re.compile(r"#\s*expect:\s*(?P<body>.*)$")
_PAIR = re.compile(r"\b(" + "|".join(STATUSES) + r")\s+([a-z0-9_]+)\b")


@dataclass(frozen=True)
class Marker:
    file: str
    line: int
    status: str
    kind: str
    order: int  # position among same-kind markers on the line


def parse_markers(path: str | Path) -> list[Marker]:
    """Every ``# expect:`` pair of a file. Raises ValueError on a malformed marker."""
    path = Path(path)
    out: list[Marker] = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        m = _MARKER.search(line)
        if not m:
            continue
        pairs = _PAIR.findall(m.group("body"))
        if not pairs:
            raise ValueError(f"{path}:{lineno}: '# expect:' without a '<status> <kind>' pair")
        seen: dict[str, int] = {}
        for status, kind in pairs:
            if kind not in KINDS:
                raise ValueError(f"{path}:{lineno}: unknown kind {kind!r} (catalogue kinds: {sorted(KINDS)})")
            out.append(Marker(str(path), lineno, status, kind, seen.get(kind, 0)))
            seen[kind] = seen.get(kind, 0) + 1
    return out


def program_files() -> list[Path]:
    """Every marked program: examples/ and tests/corpus/programs/ (pytest files beside them excluded)."""
    files = sorted(EXAMPLES.glob("*.py")) + sorted(PROGRAMS.glob("*.py"))
    return [f for f in files if not f.name.startswith("test_") and f.name != "__init__.py"]


def load_module(path: str | Path, name: str | None = None):
    """Import a program file as a fresh module (its ``__main__`` block does not run)."""
    path = Path(path)
    name = name or f"corpus_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the oracle --------------------------------------------------------------

def _all_finite(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return True
        return bool(torch.isfinite(value).all())
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_all_finite(v) for v in value)
    return True


def _oracle_class():
    import torch
    from torch.overrides import TorchFunctionMode, resolve_name

    class NonFiniteOracle(TorchFunctionMode):
        """Records (line, kind) of catalogue ops in ``path`` that turn finite operands into NaN/INF."""

        def __init__(self, path: str | Path):
            super().__init__()
            self.path = str(Path(path).resolve())
            self.events: list[tuple[int, str, str, str]] = []  # (line, kind, op, "nan"/"inf"/"-inf")

        def _line(self) -> int | None:
            frame = sys._getframe(2)
            while frame is not None:
                if frame.f_code.co_filename == self.path:
                    return frame.f_lineno
                frame = frame.f_back
            return None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                name = resolve_name(func)
            except Exception:  # some wrappers have no public name
                name = None
            row = lookup(name) if name else None
            # in-place ops overwrite their operand: judge the operands before the call
            finite_before = row is not None and _all_finite(args) and _all_finite(list(kwargs.values()))
            out = func(*args, **kwargs)
            if row is not None and finite_before:
                outs = out if isinstance(out, tuple) else (out,)
                for o in outs:
                    if isinstance(o, torch.Tensor) and o.is_floating_point() and not bool(torch.isfinite(o).all()):
                        line = self._line()
                        if line is not None:
                            bad = o[~torch.isfinite(o)].flatten()[0].item() if o.numel() else float("nan")
                            result = "nan" if math.isnan(bad) else ("inf" if bad > 0 else "-inf")
                            self.events.append((line, row.kind, name, result))
                        break
            return out

        def fired(self) -> set[tuple[int, str]]:
            return {(line, kind) for line, kind, _, _ in self.events}

    return NonFiniteOracle


def oracle(path: str | Path):
    """A fresh NonFiniteOracle for one program file (use as a context manager)."""
    return _oracle_class()(path)
