"""Divisors that are sizes of tensors the program never empties: ``/ (c * h * w)``, ``/ x.size(0)``.

The range analysis gives every size ``>= 0``, so ``gram / (ch * h * w)`` with ``b, ch, h, w =
y.size()`` reads as a possible division by zero. A size is 0 only for an empty tensor, and
whether a tensor may be empty is the question ``provenance.Provenance.may_be_empty`` already
answers for a mean: after a data-dependent selection (``x[mask]``, ``nonzero``, a slice with
computed bounds, a list built at run time), yes; a model's input or output, a parameter, a
tensor of a fixed size, no. So a divisor made only of sizes of tensors that may not be empty,
positive constants, settings of the program, ``+``, ``*``, square roots and constant powers
(``/ math.sqrt(q.size(-1))``, the attention scale) is no NaN site, nor a count of
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

from grist_lsp.analyzer.bindings import literal_number
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.positions import node_words
from grist_lsp.analyzer.provenance import Provenance
from grist_lsp.analyzer.sizes import imports_pandas
from grist_lsp.analyzer.tensors import ArrayOrigins, Origin

_DEPTH = 6  # names followed through their definitions before giving up
_ROOTS = frozenset({"math.sqrt", "numpy.sqrt"})  # of a Python size: > 0 when the size is


@dataclass
class SizeDivisors:
    flow: DataFlow
    origins: ArrayOrigins
    provenance: Provenance
    # A factor that is a positive-or-raising Python setting (``2. * z_dim * self.z_var``): the
    # site finder's own judgement of a divisor made of settings.
    setting: Callable[[ast.AST], bool]
    _frames: bool | None = None
    _functions: list[ast.FunctionDef | ast.AsyncFunctionDef] | None = None

    def _pandas(self) -> bool:
        if self._frames is None:
            self._frames = imports_pandas(self.flow)
        return self._frames

    def why_nonzero(self, divisor: ast.AST) -> str | None:
        """Words on why ``divisor`` is never 0 (the tensors whose sizes it multiplies), or None."""
        measured: list[ast.AST] = []
        if not self._sizes_only(divisor, measured, 0, whole=False) or not measured:
            return None
        names = ", ".join(dict.fromkeys(node_words(m, "a tensor") for m in measured))
        return (
            f"the divisor is a size of {names}, which nothing here can empty "
            "(no mask, no selection, no computed slice): a tensor's size is 0 only when it is empty"
        )

    def _sizes_only(self, e: ast.AST, measured: list[ast.AST], depth: int, whole: bool) -> bool:
        """``whole``: inside ``int()``, where a fraction would truncate to 0 (``int(n * 0.5)``), so
        only sizes and whole constants count."""
        if depth > _DEPTH:
            return False
        if isinstance(e, ast.Constant):
            v = e.value
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return False
            return v > 0 and (not whole or float(v).is_integer())
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Add)):
            return self._sizes_only(e.left, measured, depth, whole) and self._sizes_only(
                e.right, measured, depth, whole
            )
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow) and not whole:
            # a size is >= 1, and any power of it with a constant exponent is > 0
            return literal_number(e.right) not in (None, 0.0) and self._sizes_only(
                e.left, measured, depth, whole
            )
        if (
            isinstance(e, ast.Call)
            and not whole
            and self.provenance.resolver.qualified_name(e.func) in _ROOTS
        ):
            return len(e.args) == 1 and not e.keywords and self._sizes_only(e.args[0], measured, depth, whole)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("int", "float"):
            inner = whole or e.func.id == "int"
            return len(e.args) == 1 and not e.keywords and self._sizes_only(e.args[0], measured, depth, inner)
        tensor = _measured(e)
        if tensor is not None:
            measured.append(tensor)
            return self._never_empty(tensor, torch_only=isinstance(e, ast.Call) and not _is_len(e))
        if not whole and self.setting(e):
            return True
        if isinstance(e, (ast.Name, ast.Attribute)) and self.flow.is_use(e):
            defs = self.flow.defs_reaching(e)
            return bool(defs) and all(self._def_sizes_only(d, e, measured, depth + 1, whole) for d in defs)
        return False

    def _def_sizes_only(self, d: Def, use: ast.AST, measured: list[ast.AST], depth: int, whole: bool) -> bool:
        if d.how == "aug" and isinstance(d.value, ast.AugAssign) and isinstance(d.value.op, ast.Add):
            # total += labels.size(0): the increment, and every value it starts from
            return self._sizes_only(d.value.value, measured, depth, whole) and self._starts(
                d.name, use, measured, depth
            )
        if d.how in ("assign", "walrus", "unpack") and _is_zero(_bound(d)):
            return self._counted(d, use)
        if d.how in ("assign", "walrus") and d.value is not None:
            return self._sizes_only(d.value, measured, depth, whole)
        if d.how == "unpack" and d.value is not None:
            part, whole_path = d.unpacked()
            if part is None:
                return False
            if whole_path:
                return self._sizes_only(part, measured, depth, whole)
            # b, c, h, w = x.size(): each name is one of x's sizes
            tensor = _shape_of(part.value if isinstance(part, ast.Subscript) else part)
            if tensor is not None:
                measured.append(tensor)
                return self._never_empty(tensor, torch_only=isinstance(part, ast.Call))
        return False

    def _starts(self, name: str, use: ast.AST, measured: list[ast.AST], depth: int) -> bool:
        """Every plain binding of the count ``name`` (``total = 0``, ``n = x.size(0)``) is 0 with a
        growth on every pass, or sizes: ``n = -1; n += x.size(0)`` is 0 for one element."""
        home = self._function_of(use)
        starts = [
            d
            for d in self.flow.defs
            if d.name == name
            and d.how in ("assign", "walrus", "unpack")
            and self._function_of(d.node) is home
        ]
        return bool(starts) and all(
            self._counted(d, use)
            if _is_zero(_bound(d))
            else self._def_sizes_only(d, use, measured, depth + 1, True)
            for d in starts
        )

    def _function_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost function whose lines hold ``node`` (None: module level)."""
        if self._functions is None:
            self._functions = [
                f for f in ast.walk(self.flow.tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
        line = getattr(node, "lineno", -1)
        inside = [f for f in self._functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
        return max(inside, key=lambda f: f.lineno, default=None)

    def _counted(self, d: Def, use: ast.AST) -> bool:
        """``total = 0`` that a loop adds to on every pass, and that ``use`` reads after it ran."""
        return d.value is not None and not self.provenance.growth.may_stay_empty(
            d.value, d.name, use, count=True
        )

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


def _bound(d: Def) -> ast.AST | None:
    """The value a plain binding gives its name (the part of ``a, b = 0, 0`` it names)."""
    if d.how == "unpack":
        part, whole = d.unpacked()
        return part if whole else None
    return d.value


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
