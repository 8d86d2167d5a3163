"""Sizes proved non-zero at a use: ``len(xs)``, ``x.shape[k]``, ``x.size(k)``, ``x.numel()`` >= 1.

A size is 0 only for an empty container or tensor, and dividing by it is the
classic ``sum(xs) / len(xs)``. The range analysis gives every size ``>= 0``;
this module proves ``>= 1`` at one use, only from what the program itself has
established on every path to that use:

* **indexing** ``x[i]`` with integer literals (``x[0]``, ``x[-1]``, ``x[:, 0]``,
  ``x[..., 0]``) evaluated in a statement that runs before the use on every
  path: an earlier statement of the use's block or of an enclosing block, in
  a part of it that is always evaluated (not a lambda, a comprehension, the
  branches of ``a if c else b``, the right side of ``and``/``or``). Indexing
  an empty sequence, array or tensor raises, so past it that dimension has an
  element;
* **guards**: the use is inside ``if C:`` / ``while C:`` (C true), in the
  ``else`` of ``if C:`` (C false), after ``if C: <return/raise/continue/break>``
  (C false), or after ``assert C`` (C true), where C says the size is not 0:
  ``xs`` / ``not xs`` (truthiness), ``len(xs) == 0``, ``x.shape[0] > 0``,
  ``x.numel() == 0`` ..., through ``not``, ``and`` and ``or``.

``numel() >= 1`` (and a truthy tensor, which has one element) proves every
dimension; ``len(x)`` is dimension 0. A dimension is matched by its literal
index only (``shape[-1]`` is not ``shape[2]``: the rank is not known).

"The same x": the name has the same definitions at the fact and at the use
(guards' refinements see through to what they refine), none of them lies
between the two (a loop could carry a later value back), and between them x
is not shrunk: no in-place op on it (those are definitions), no ``pop``,
``clear``, ``remove``, ``discard``, ``popitem``, ``popleft``, ``del`` or
attribute store on it, and, for ``len(x)`` (x may be a list), no call of a
function outside torch/numpy/math/builtins in between (it might shrink x).

Assumptions, stated: integer indexing raises on an empty object (true of
sequences, tensors and arrays; not of a pandas column lookup, so a file that
imports pandas gets no indexing proof); ``assert`` runs (no ``python -O``),
as for the other guards; a truthy container is not empty; a function called
in between does not rebind x through ``global``/``nonlocal`` nor resize a
tensor in place (``resize_`` on x itself is a definition, so it is seen).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from grist_lsp.analyzer.dataflow import DataFlow, Def, _terminates
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.positions import int_literal, node_words

if TYPE_CHECKING:
    from grist_lsp.analyzer.ranges import RangeAnalysis

ALL = "all"  # every dimension (numel >= 1)
_SHRINKING = frozenset({"pop", "popitem", "clear", "remove", "discard", "popleft"})
_LIBRARY_ROOTS = ("torch.", "numpy.", "math.", "builtins.")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)
_BODIES = ("body", "orelse", "finalbody", "handlers")


@dataclass(frozen=True)
class SizeUse:
    """A size expression: the object it measures and which dimension (ALL for numel)."""

    base: ast.Name
    dim: int | str
    form: str  # "len", "shape" or "numel": only len(x) may measure a list


@dataclass(frozen=True)
class _Fact:
    """Some dimensions of ``base`` are >= 1 from ``anchor`` on; ``words`` say why."""

    base: ast.Name
    dims: frozenset[int | str]
    anchor: ast.AST
    words: str
    # evaluated right before the use, though written after it (the test of `a if test else b`)
    adjacent: bool = False


def _pos(n: ast.AST, end: bool = False) -> tuple[int, int]:
    if end:
        return getattr(n, "end_lineno", 0) or 0, getattr(n, "end_col_offset", 0) or 0
    return getattr(n, "lineno", 0) or 0, getattr(n, "col_offset", 0) or 0


def _words(e: ast.AST) -> str:
    return node_words(e, "an earlier statement")


@dataclass
class SizeProofs:
    flow: DataFlow
    resolver: Resolver
    ranges: RangeAnalysis
    _parents: dict[int, ast.AST] = field(default_factory=dict)
    _pandas: bool | None = None

    # --- entry point ---------------------------------------------------------------

    def at_least_one(self, e: ast.AST) -> str | None:
        """Words on why the size expression ``e`` is >= 1 where it is evaluated, or None."""
        use = self.size_use(e)
        if use is None:
            return None
        for fact in self._facts_before(e):
            if fact.base.id != use.base.id or not (use.dim in fact.dims or ALL in fact.dims):
                continue
            if self._same_value(fact, use):
                return fact.words
        return None

    def size_use(self, e: ast.AST) -> SizeUse | None:
        """``len(x)``, ``x.shape[k]``, ``x.size()[k]``, ``x.size(k)``, ``x.numel()`` of a local name x."""
        if isinstance(e, ast.Subscript):
            k = int_literal(e.slice)
            v = e.value
            if k is None:
                return None
            if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name):
                return SizeUse(v.value, k, "shape")
            if (
                isinstance(v, ast.Call)
                and isinstance(v.func, ast.Attribute)
                and v.func.attr == "size"
                and not v.args
                and not v.keywords
                and isinstance(v.func.value, ast.Name)
            ):
                return SizeUse(v.func.value, k, "shape")
            return None
        if not isinstance(e, ast.Call):
            return None
        if (
            isinstance(e.func, ast.Name)
            and len(e.args) == 1
            and not e.keywords
            and isinstance(e.args[0], ast.Name)
            and self.resolver.qualified_name(e.func) == "builtins.len"
        ):
            return SizeUse(e.args[0], 0, "len")
        f = e.func
        if not isinstance(f, ast.Attribute) or not isinstance(f.value, ast.Name):
            return None
        if f.attr in ("numel", "nelement") and not e.args and not e.keywords:
            return SizeUse(f.value, ALL, "numel")
        if f.attr == "size":
            arg = (
                e.args[0]
                if len(e.args) == 1 and not e.keywords
                else (
                    e.keywords[0].value
                    if not e.args and len(e.keywords) == 1 and e.keywords[0].arg == "dim"
                    else None
                )
            )
            k = int_literal(arg) if arg is not None else None
            return SizeUse(f.value, k, "shape") if k is not None else None
        return None

    # --- what holds before a node ----------------------------------------------------

    def _parent(self, n: ast.AST) -> ast.AST | None:
        if not self._parents:
            for p in ast.walk(self.flow.tree):
                for c in ast.iter_child_nodes(p):
                    self._parents[id(c)] = p
        return self._parents.get(id(n))

    def _facts_before(self, use: ast.AST) -> Iterator[_Fact]:
        """Facts established on every path to ``use``, nearest first, within its function."""
        node, parent = use, self._parent(use)
        while parent is not None:
            if isinstance(parent, ast.Lambda) or isinstance(parent, ast.ClassDef):
                return  # a lambda runs later; a class body is its own scope
            block = next(
                (
                    getattr(parent, f)
                    for f in _BODIES
                    if isinstance(getattr(parent, f, None), list) and node in getattr(parent, f)
                ),
                None,
            )
            if block is not None:
                for s in reversed(block[: block.index(node)]):
                    yield from self._statement_facts(s)
                if isinstance(parent, (ast.If, ast.While)) and block is parent.body:
                    yield from self._cond_facts(parent.test, True, parent.test)
                elif isinstance(parent, ast.If) and block is parent.orelse:
                    yield from self._cond_facts(parent.test, False, parent.test)
                if isinstance(parent, _SCOPES):
                    return
            elif isinstance(parent, ast.IfExp) and node is not parent.test:
                for fact in self._cond_facts(parent.test, node is parent.body, parent.test):
                    yield replace(fact, adjacent=True)
            elif isinstance(parent, ast.BoolOp):
                i = next((j for j, v in enumerate(parent.values) if v is node), 0)
                for prior in parent.values[:i]:
                    yield from self._cond_facts(prior, isinstance(parent.op, ast.And), prior)
            node, parent = parent, self._parent(parent)

    def _statement_facts(self, s: ast.stmt) -> Iterator[_Fact]:
        if isinstance(s, ast.If):
            if _terminates(s.body) and not _terminates(s.orelse):
                yield from self._cond_facts(s.test, False, s)
            elif _terminates(s.orelse) and not _terminates(s.body):
                yield from self._cond_facts(s.test, True, s)
        elif isinstance(s, ast.Assert):
            yield from self._cond_facts(s.test, True, s)
        for part in self._evaluated_parts(s):
            for n in self._always_evaluated(part):
                if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                    dims = self._indexed_dims(n.slice)
                    if dims and not self._imports_pandas():
                        yield _Fact(n.value, dims, n, f"{_words(n)} is indexed before, so it is not empty")

    @staticmethod
    def _evaluated_parts(s: ast.stmt) -> list[ast.AST]:
        """The parts of a statement that run whenever the statement does."""
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            return [p for p in (s.value, *targets) if p is not None]
        if isinstance(s, ast.Expr):
            return [s.value]
        if isinstance(s, (ast.If, ast.While, ast.Assert)):
            return [s.test]
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return [s.iter]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            return [i.context_expr for i in s.items]
        return []

    @staticmethod
    def _always_evaluated(e: ast.AST) -> Iterator[ast.AST]:
        stack = [e]
        while stack:
            n = stack.pop()
            yield n
            if isinstance(n, (ast.Lambda, *_COMPREHENSIONS)):
                continue
            if isinstance(n, ast.IfExp):
                stack.append(n.test)
            elif isinstance(n, ast.BoolOp):
                stack.append(n.values[0])
            else:
                stack.extend(ast.iter_child_nodes(n))

    @staticmethod
    def _indexed_dims(index: ast.AST) -> frozenset[int | str]:
        """Dimensions that integer indexing proves non-empty (empty set: none provable)."""
        elts = index.elts if isinstance(index, ast.Tuple) else [index]
        dims: set[int | str] = set()
        ellipsis = [i for i, x in enumerate(elts) if isinstance(x, ast.Constant) and x.value is Ellipsis]
        if len(ellipsis) > 1:
            return frozenset()
        consumed = [x for x in elts if not (isinstance(x, ast.Constant) and x.value in (None, Ellipsis))]
        for x in consumed:
            if int_literal(x) is None and not isinstance(x, ast.Slice):
                return frozenset()  # a tensor or mask index: which dimension is which is unknown
        split = ellipsis[0] if ellipsis else len(elts)
        before = [x for x in elts[:split] if not (isinstance(x, ast.Constant) and x.value is None)]
        after = [x for x in elts[split + 1 :] if not (isinstance(x, ast.Constant) and x.value is None)]
        for i, x in enumerate(before):
            if int_literal(x) is not None:
                dims.add(i)
        for i, x in enumerate(after):
            if int_literal(x) is not None:
                dims.add(i - len(after))
        return frozenset(dims)

    def _cond_facts(self, cond: ast.AST, truth: bool, anchor: ast.AST, words: str = "") -> Iterator[_Fact]:
        """Size facts that hold where ``cond`` evaluated to ``truth``."""
        words = words or f"guarded by {_words(cond)}"
        if isinstance(cond, ast.UnaryOp) and isinstance(cond.op, ast.Not):
            yield from self._cond_facts(cond.operand, not truth, anchor, words)
            return
        if isinstance(cond, ast.BoolOp):
            if isinstance(cond.op, ast.And) == truth:  # all parts hold (and: true; or: false)
                for v in cond.values:
                    yield from self._cond_facts(v, truth, anchor, words)
            return
        bare = self.size_use(cond)
        if bare is not None and truth:  # `len(xs) and ...`: a size that is truthy is not 0
            yield _Fact(
                bare.base, frozenset({ALL, 0}) if bare.dim == ALL else frozenset({bare.dim}), anchor, words
            )
            return
        if isinstance(cond, ast.Name) and truth:
            yield _Fact(cond, frozenset({0, ALL}), anchor, words)  # truthy: non-empty (a tensor: one element)
            return
        if not isinstance(cond, ast.Compare) or len(cond.ops) != 1:
            return
        from grist_lsp.analyzer.ranges import Fact, RangeAnalysis  # cycle: ranges uses this module

        for side, other, op in (
            (cond.left, cond.comparators[0], type(cond.ops[0])),
            (cond.comparators[0], cond.left, _FLIP.get(type(cond.ops[0]))),
        ):
            use = self.size_use(side)
            if use is None or op is None:
                continue
            c = self.ranges.fact(other)
            after = RangeAnalysis._constrain(Fact(0.0, float("inf"), False, "num"), op, c, truth, words)
            if after.lo >= 1 or after.nonzero or after.pytype == "bottom":
                dims = frozenset({ALL, 0}) if use.dim == ALL else frozenset({use.dim})
                yield _Fact(use.base, dims, anchor, words)

    # --- the same value --------------------------------------------------------------

    def _underlying(self, name: ast.Name) -> frozenset[int]:
        """The definitions of ``name`` here, seeing through guard refinements."""
        out: set[int] = set()
        stack: list[Def] = list(self.flow.defs_reaching(name))
        seen: set[int] = set()
        while stack:
            d = stack.pop()
            if d.key in seen:
                continue
            seen.add(d.key)
            if d.how == "refine":
                stack.extend(self.flow.defs_reaching(d.node))
            else:
                out.add(d.key)
        return frozenset(out)

    def _same_value(self, fact: _Fact, use: SizeUse) -> bool:
        at_fact, at_use = self._underlying(fact.base), self._underlying(use.base)
        if not at_use or at_fact != at_use:
            return False
        if fact.adjacent:
            return True  # nothing runs between the test and its branch
        start, end = _pos(fact.anchor, end=True), _pos(use.base)
        if not start < end:
            return False
        for k in at_use:
            if start <= _pos(self.flow.defs[k].node) < end:
                return False  # a definition in between (a loop can carry it back)
        return not self._shrunk_between(use, start, end)

    def _shrunk_between(self, use: SizeUse, start: tuple[int, int], end: tuple[int, int]) -> bool:
        scope = use.base
        while scope is not None and not isinstance(scope, _SCOPES):
            scope = self._parent(scope)
        name = use.base.id
        for n in ast.walk(scope if scope is not None else self.flow.tree):
            if not hasattr(n, "lineno") or not (start <= _pos(n) < end):
                continue
            if isinstance(n, ast.Call):
                f = n.func
                if (
                    isinstance(f, ast.Attribute)
                    and isinstance(f.value, ast.Name)
                    and f.value.id == name
                    and f.attr in _SHRINKING
                ):
                    return True
                if use.form == "len" and self._may_mutate_arguments(n):
                    return True
            elif isinstance(n, ast.Delete) and any(
                isinstance(x, ast.Name) and x.id == name for t in n.targets for x in ast.walk(t)
            ):
                return True
            elif (
                isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id == name
            ):
                return True  # x.data = ...
        return False

    def _may_mutate_arguments(self, call: ast.Call) -> bool:
        """A call that may shrink a list it can reach: not a torch/numpy/math/builtin function."""
        if self.flow.callee(call) is not None:
            return True
        qn = self.resolver.qualified_name(call.func)
        if qn is not None:
            return not qn.startswith(_LIBRARY_ROOTS)
        return self.ranges.method_receiver(call) is None  # self.helper(), obj.run(): unknown code

    def _imports_pandas(self) -> bool:
        if self._pandas is None:
            self._pandas = imports_pandas(self.flow)
        return self._pandas


def imports_pandas(flow: DataFlow) -> bool:
    """Whether the module imports pandas, whose frames answer ``df[0]``, ``len(df)`` and
    ``df.shape`` like arrays, with no rows as an ordinary state."""
    return any(d.how == "import" and (d.qualified or "").split(".")[0] == "pandas" for d in flow.defs)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FLIP: dict[type, type] = {
    ast.Gt: ast.Lt,
    ast.Lt: ast.Gt,
    ast.GtE: ast.LtE,
    ast.LtE: ast.GtE,
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
}
