"""Where-branch sites: unsafe ops whose forward value the program discards where it is invalid.

``torch.where(x > 0, torch.log(x), 0)`` never shows the NaN of ``log(-1)`` nor the ``-inf`` of
``log(0)``: the where drops them. Its gradient does not: the discarded branch gets a zero
upstream gradient, and at ``x == 0`` the op's local derivative is infinite, so the backward pass
computes ``0 * inf = NaN`` and every weight behind ``x`` becomes NaN. The same holds when the
value is dropped by ``masked_fill`` (the mask covers the invalid entries), by boolean indexing
(``torch.log(x)[x > 0]``, ``y[~ok] = 0``) or by ``nan_to_num``.

This module owns the static question "is this site's value discarded downstream, and by what?"
(``mark_where_branches``, over the dataflow graph of ``analyzer/dataflow.py``: the value is
followed through enclosing expressions and, a few assignments deep, through the uses of the
names it is bound to), the guard a fix needs (``guard_at``: the condition under which the value
is kept), and, per kind, a value that is safe in the discarded branch (``SAFE_FILL``), which
the double-where fix (``analyzer/fixes/build.py``) puts there. Torch-free, like the whole static pass.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from grist_lsp.analyzer.catalogue import KINDS
from grist_lsp.analyzer.dataflow import DataFlow, build_dataflow
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.parsing import UNPARSABLE, parse
from grist_lsp.analyzer.positions import SourceLines
from grist_lsp.analyzer.sites import Candidate
from grist_lsp.model import Span

# A value inside the valid domain of each kind: the double-where fix puts it in the discarded
# branch, where it is computed and thrown away, so that the op's derivative there is finite.
SAFE_FILL: dict[str, str] = {
    "log": "1",
    "log1p": "0",
    "sqrt": "1",
    "rsqrt": "1",
    "div": "1",
    "pow": "1",
    "exp": "0",
    "acos": "0",
    "atanh": "0",
    "acosh": "2",
    "lgamma": "1",
    "logit": "0.5",
}

_HOPS = 3  # assignments followed from the site to the guard (``y = log(x); z = -y; where(c, z, 0)``)
_MASKING_CALLS = frozenset(
    {
        "lt",
        "le",
        "gt",
        "ge",
        "eq",
        "ne",
        "logical_and",
        "logical_or",
        "logical_not",
        "logical_xor",
        "isfinite",
        "isnan",
        "isinf",
        "bool",
    }
)


@dataclass(frozen=True)
class Guard:
    """What discards a site's value: ``words`` for people; ``condition`` (source text) and
    ``kept_when`` say where the value is kept (``condition`` True when ``kept_when``); no
    condition for ``nan_to_num``, which keeps every finite value."""

    words: str
    condition: str | None = None
    kept_when: bool = True
    # The names the condition reads, through their assignments: a guard discards a site's invalid
    # values only if its condition is about the site's operand (``torch.where(h > 0, log(h), 0)``),
    # not an unrelated mask (an attention mask over scores divided by a scale).
    names: frozenset[str] = frozenset()


def _is_mask(e: ast.AST, flow: DataFlow, depth: int = 0) -> bool:
    """A boolean-looking index: a comparison, ``~m``, ``a & b``, a mask-producing call, or a name
    every definition of which is one."""
    if isinstance(e, ast.Compare):
        return True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Invert, ast.Not)):
        return _is_mask(e.operand, flow, depth)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _is_mask(e.left, flow, depth) or _is_mask(e.right, flow, depth)
    if isinstance(e, ast.Call):
        f = e.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name in _MASKING_CALLS
    if isinstance(e, ast.Name) and depth < 3:
        defs = flow.defs_reaching(e)
        return bool(defs) and all(
            d.how == "assign" and d.value is not None and _is_mask(d.value, flow, depth + 1) for d in defs
        )
    return False


def _names(expr: ast.AST, flow: DataFlow, hops: int = _HOPS) -> frozenset[str]:
    """Names ``expr`` reads, and those the assignments of these names read, ``hops`` deep."""
    out: set[str] = set()
    todo: list[tuple[ast.AST, int]] = [(expr, 0)]
    seen: set[int] = set()
    while todo:
        e, depth = todo.pop()
        for n in ast.walk(e):
            if not isinstance(n, ast.Name) or n.id in out:
                continue
            out.add(n.id)
            if depth >= hops:
                continue
            for d in flow.defs_reaching(n):
                if d.how in ("assign", "walrus") and d.value is not None and d.key not in seen:
                    seen.add(d.key)
                    todo.append((d.value, depth + 1))
    return frozenset(out)


def _text(e: ast.AST) -> str:
    try:
        return ast.unparse(e)
    except Exception:
        return "?"


_GUARD_NAMES = frozenset({"where", "masked_fill", "masked_fill_", "nan_to_num", "nan_to_num_"})
# A line with a subscript that may be a mask (``x[m]``, ``x[x > 0]``, ``y[~ok] = 0``), not ``w[..., 0]``:
# only the statements on such lines are walked for boolean indexing (walking every expression of a
# module cost a quarter of the static pass' budget).
_MAYBE_MASK_INDEX = re.compile(r"\[[^\[\]\n]*[A-Za-z_<>=!~&|][^\[\]\n]*\]")
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Finder:
    """Which values the module discards, found from the discarding ops backwards.

    Every node inside an expression a guard discards is reached, and so is every node of the value
    of an assignment (up to ``_HOPS`` deep) whose name is read there. A value bound to a name is
    discarded only if *every* read of that name is reached: one read that escapes (a print, a
    second unguarded use) keeps its NaN visible, and the site is an ordinary one.
    """

    def __init__(self, tree: ast.Module, text: str, flow: DataFlow, resolver: Resolver) -> None:
        self.flow = flow
        self.resolver = resolver
        self.reached: dict[int, tuple[Guard, tuple[int, ...]]] = {}  # node id -> guard, defs on the way
        self.walked: set[int] = set()
        for call, _ in flow.operations:
            if isinstance(call, ast.Call):
                f = call.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in _GUARD_NAMES:
                    for guard, expr in self._call_guards(call):
                        self._spread(expr, guard, (), 0)
        lines = {i + 1 for i, line in enumerate(text.splitlines()) if _MAYBE_MASK_INDEX.search(line)}
        if lines:
            self._subscript_guards(tree, lines)
        self._leaky_defs: set[int] | None = None  # computed on the first question that needs it

    def guard_of(self, node: ast.AST) -> Guard | None:
        hit = self.reached.get(id(node))
        if hit is None:
            return None
        if hit[1]:
            if self._leaky_defs is None:
                self._leaky_defs = self._leaky()
            if any(k in self._leaky_defs for k in hit[1]):
                return None
        return hit[0]

    def _spread(self, expr: ast.AST, guard: Guard, chain: tuple[int, ...], hops: int) -> None:
        stack = [expr]
        while stack:
            n = stack.pop()
            if id(n) in self.reached or isinstance(n, _SCOPES):
                continue
            self.reached[id(n)] = (guard, chain)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and hops < _HOPS:
                for d in self.flow.defs_reaching(n):
                    if d.how in ("assign", "walrus") and d.value is not None and d.key not in self.walked:
                        self.walked.add(d.key)
                        self._spread(d.value, guard, (*chain, d.key), hops + 1)
            stack.extend(ast.iter_child_nodes(n))

    def _leaky(self) -> set[int]:
        """The walked definitions with a read that no guard discards."""
        leaky: set[int] = set()
        for node, preds in self.flow.preds.items():
            if node[0] != "use" or node[1] in self.reached:
                continue
            for p in preds:
                if p[0] == "def" and p[1] in self.walked:
                    leaky.add(p[1])
        return leaky

    def _call_guards(self, call: ast.Call) -> list[tuple[Guard, ast.expr]]:
        """(guard, the argument whose value it discards) for a where / masked_fill / nan_to_num call."""
        if any(isinstance(a, ast.Starred) for a in call.args):
            return []
        line = call.lineno
        args = call.args
        qn = self.resolver.qualified_name(call.func)
        if qn == "torch.where" and len(args) == 3:
            words, cond, names = f"torch.where on line {line}", _text(args[0]), _names(args[0], self.flow)
            return [(Guard(words, cond, True, names), args[1]), (Guard(words, cond, False, names), args[2])]
        if qn == "torch.masked_fill" and len(args) >= 2:
            names = _names(args[1], self.flow)
            return [(Guard(f"torch.masked_fill on line {line}", _text(args[1]), False, names), args[0])]
        if qn == "torch.nan_to_num" and args:
            return [(Guard(f"torch.nan_to_num on line {line}"), args[0])]
        f = call.func
        if qn is not None or not isinstance(f, ast.Attribute):
            return []
        if f.attr == "where" and len(args) == 2:
            words, cond, names = f"Tensor.where on line {line}", _text(args[0]), _names(args[0], self.flow)
            return [(Guard(words, cond, True, names), f.value), (Guard(words, cond, False, names), args[1])]
        if f.attr in ("masked_fill", "masked_fill_") and args:
            names = _names(args[0], self.flow)
            return [(Guard(f"Tensor.{f.attr} on line {line}", _text(args[0]), False, names), f.value)]
        if f.attr in ("nan_to_num", "nan_to_num_"):
            return [(Guard(f"Tensor.{f.attr} on line {line}"), f.value)]
        return []

    def _subscript_guards(self, tree: ast.Module, lines: set[int]) -> None:
        """Boolean indexing (``x[m]``) and masked assignments (``y[~ok] = 0``) on ``lines``."""
        stack: list[ast.AST] = list(tree.body)
        while stack:
            stmt = stack.pop()
            own: list[ast.AST] = []
            for name, value in ast.iter_fields(stmt):
                items = value if isinstance(value, list) else [value]
                if name in _BLOCKS:
                    stack.extend(v for v in items if isinstance(v, ast.AST))
                else:
                    own.extend(v for v in items if isinstance(v, ast.AST))
            first, last = getattr(stmt, "lineno", 0), getattr(stmt, "end_lineno", 0) or 0
            if not any(first <= n <= last for n in lines) or isinstance(
                stmt, (ast.FunctionDef, ast.ClassDef)
            ):
                continue
            for expr in own:
                for n in ast.walk(expr):
                    if not isinstance(n, ast.Subscript) or not _is_mask(n.slice, self.flow):
                        continue
                    mask, names = _text(n.slice), _names(n.slice, self.flow)
                    if isinstance(n.ctx, ast.Store):
                        # ``y[~ok] = 0``: the entries the mask selects are overwritten, the others kept;
                        # the assignment is also the read of ``y`` that the dataflow graph records.
                        guard = Guard(f"the masked assignment on line {n.lineno}", mask, False, names)
                        self.reached.setdefault(id(n), (guard, ()))
                    else:
                        guard = Guard(f"the boolean indexing on line {n.lineno}", mask, True, names)
                    self._spread(n.value, guard, (), 0)


def _eligible(c: Candidate) -> bool:
    """Elementwise torch ops decided by value (math./numpy ops have no gradient to break; a
    matrix op's failure is not one entry a where could discard)."""
    region = KINDS[c.site.kind].region
    return (
        c.site.op.startswith("torch.")
        and region.shape is None
        and region.matrix is None
        and not region.inf_operands
    )


def mark_where_branches(
    candidates: list[Candidate], tree: ast.Module, text: str, flow: DataFlow, resolver: Resolver
) -> None:
    """Set ``Site.discarded_by`` on every candidate whose value a guard discards downstream."""
    todo = [c for c in candidates if _eligible(c)]
    if not todo:
        return
    try:
        finder = _Finder(tree, text, flow, resolver)
    except RecursionError:
        return
    for c in todo:
        guard = finder.guard_of(c.node)
        if guard is not None and _covers(guard, c.operand, flow):
            c.site = dataclasses.replace(c.site, discarded_by=guard.words)


def _covers(guard: Guard, operand: ast.AST | None, flow: DataFlow) -> bool:
    """Whether the guard's condition is about the operand (see ``Guard.names``); ``nan_to_num``
    drops exactly the non-finite values, whatever made them."""
    if guard.condition is None:
        return True
    return operand is not None and bool(guard.names & _names(operand, flow))


def where_reason(words: str, kind: str) -> str:
    """The static reason's clause for a where-branch site."""
    region = KINDS[kind].region
    return (
        f"its value is discarded by {words} where it is invalid, but the gradient still flows "
        f"through the discarded branch: an operand at the edge of {region.text} gives 0 * inf = NaN "
        "in the backward pass"
    )


def guard_at(text: str, span: Span) -> Guard | None:
    """The guard discarding the value of the operation at ``span`` in ``text`` (for fixes), or None."""
    try:
        tree = parse(text)
    except UNPARSABLE:
        return None
    lines = SourceLines(text)
    node = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.Call, ast.BinOp, ast.AugAssign)) and lines.span(n) == span
        ),
        None,
    )
    if node is None:
        return None
    flow = build_dataflow(tree)
    try:
        return _Finder(tree, text, flow, Resolver(flow)).guard_of(node)
    except RecursionError:
        return None
