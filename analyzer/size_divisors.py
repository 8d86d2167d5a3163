"""Divisors that are sizes of tensors the program never empties: ``/ (c * h * w)``, ``/ x.size(0)``.

The range analysis gives every size ``>= 0``, so ``gram / (ch * h * w)`` with ``b, ch, h, w =
y.size()`` reads as a possible division by zero. A size is 0 only for an empty tensor, and
whether a tensor may be empty is the question ``provenance.Provenance.may_be_empty`` already
answers for a mean: after a data-dependent selection (``x[mask]``, ``nonzero``, a slice with
computed bounds, a list built at run time), yes; a model's input or output, a parameter, a
tensor of a fixed size, no. So a divisor made only of sizes of tensors that may not be empty,
positive constants, settings of the program, ``+`` and ``*`` is no NaN site, nor a count of
such sizes that a loop adds up on each of its passes (``total += labels.size(0)``; a loop's body
is assumed to run, as in ``list_growth.py``). A difference is not (``n * (n - 1)`` is 0
for one element: the unbiased variance of one sample), nor a size of a Python list (a list of
losses kept under a cap may be empty whatever the provenance of its items): the range analysis
judges those as before.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.positions import node_words
from grist_lsp.analyzer.provenance import Provenance
from grist_lsp.analyzer.sizes import imports_pandas
from grist_lsp.analyzer.tensors import ArrayOrigins, Origin

_DEPTH = 6  # names followed through their definitions before giving up


@dataclass
class SizeDivisors:
    flow: DataFlow
    origins: ArrayOrigins
    provenance: Provenance
    # A factor that is a positive-or-raising Python setting (``2. * z_dim * self.z_var``): the
    # site finder's own judgement of a divisor made of settings.
    setting: Callable[[ast.AST], bool]
    _frames: bool | None = None

    def _pandas(self) -> bool:
        if self._frames is None:
            self._frames = imports_pandas(self.flow)
        return self._frames

    def why_nonzero(self, divisor: ast.AST) -> str | None:
        """Words on why ``divisor`` is never 0 (the tensors whose sizes it multiplies), or None."""
        measured: list[ast.AST] = []
        if not self._sizes_only(divisor, measured, 0) or not measured:
            return None
        names = ", ".join(dict.fromkeys(node_words(m, "a tensor") for m in measured))
        return (
            f"the divisor is a size of {names}, which nothing here can empty "
            "(no mask, no selection, no computed slice): a tensor's size is 0 only when it is empty"
        )

    def _sizes_only(self, e: ast.AST, measured: list[ast.AST], depth: int) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float)) and not isinstance(e.value, bool) and e.value > 0
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Add)):
            return self._sizes_only(e.left, measured, depth) and self._sizes_only(e.right, measured, depth)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("int", "float"):
            return len(e.args) == 1 and self._sizes_only(e.args[0], measured, depth)
        tensor = _measured(e)
        if tensor is not None:
            measured.append(tensor)
            return self._never_empty(tensor, torch_only=isinstance(e, ast.Call) and not _is_len(e))
        if self.setting(e):
            return True
        if isinstance(e, (ast.Name, ast.Attribute)) and depth < _DEPTH and self.flow.is_use(e):
            defs = self.flow.defs_reaching(e)
            return bool(defs) and all(self._def_sizes_only(d, measured, depth + 1) for d in defs)
        return False

    def _def_sizes_only(self, d: Def, measured: list[ast.AST], depth: int) -> bool:
        start, whole = d.unpacked() if d.how == "unpack" else (d.value, d.how == "assign")
        if (
            whole
            and _is_zero(start)
            and d.value is not None
            and not self.provenance.growth.may_stay_empty(d.value, d.name)
        ):
            # total = 0 (or correct, total = 0, 0), then total += labels.size(0) on every pass of
            # a loop: a count of sizes
            return True
        if d.how == "aug" and isinstance(d.value, ast.AugAssign) and isinstance(d.value.op, ast.Add):
            return self._sizes_only(d.value.value, measured, depth)
        if d.how in ("assign", "walrus") and d.value is not None:
            return self._sizes_only(d.value, measured, depth)
        if d.how == "unpack" and d.value is not None:
            part, whole = d.unpacked()
            if part is None:
                return False
            if whole:
                return self._sizes_only(part, measured, depth)
            # b, c, h, w = x.size(): each name is one of x's sizes
            tensor = _shape_of(part.value if isinstance(part, ast.Subscript) else part)
            if tensor is not None:
                measured.append(tensor)
                return self._never_empty(tensor, torch_only=isinstance(part, ast.Call))
        return False

    def _never_empty(self, tensor: ast.AST, torch_only: bool) -> bool:
        """``torch_only``: measured by what only a tensor answers (``x.size(0)``, ``x.numel()``), so
        a value of unknown origin is one; ``len(x)`` and ``x.shape`` a list or a pandas frame answer
        too, and their emptiness is not a tensor's."""
        origin = self.origins.origin(tensor)
        if torch_only:
            if origin not in (Origin.ARRAY, Origin.CONSTANT, Origin.UNKNOWN):
                return False
        elif origin is not Origin.CONSTANT and (origin is not Origin.ARRAY or self._pandas()):
            return False
        return self.provenance.may_be_empty(tensor) is None


def _measured(e: ast.AST) -> ast.AST | None:
    """The tensor one size read measures: ``x.shape[k]``, ``x.size(k)``, ``x.size()[k]``,
    ``x.numel()``, ``len(x)``; None for anything else."""
    if isinstance(e, ast.Subscript):
        return _shape_of(e.value)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if (e.func.attr == "size" and len(e.args) == 1) or (
            e.func.attr in ("numel", "nelement") and not e.args
        ):
            return e.func.value
    if isinstance(e, ast.Call) and _is_len(e) and len(e.args) == 1:
        return e.args[0]
    return None


def _is_zero(e: ast.AST | None) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) in (int, float) and e.value == 0


def _is_len(e: ast.Call) -> bool:
    return isinstance(e.func, ast.Name) and e.func.id == "len"


def _shape_of(e: ast.AST) -> ast.AST | None:
    """``x`` of ``x.shape`` or ``x.size()`` (the whole shape), else None."""
    if isinstance(e, ast.Attribute) and e.attr == "shape":
        return e.value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "size" and not e.args:
        return e.func.value
    return None
