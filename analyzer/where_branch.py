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
the double-where fix (``analyzer/fixes.py``) puts there. Torch-free, like the whole static pass.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass

from grist_lsp.analyzer.catalogue import KINDS
from grist_lsp.analyzer.dataflow import DataFlow, build_dataflow
from grist_lsp.analyzer.names import Resolver
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


def _text(e: ast.AST) -> str:
    try:
        return ast.unparse(e)
    except Exception:
        return "?"


class _Finder:
    """Follows a site's value downstream to a guard that discards it."""

    def __init__(self, tree: ast.Module, flow: DataFlow, resolver: Resolver) -> None:
        self.flow = flow
        self.resolver = resolver
        self.parents: dict[int, ast.AST] = {}
        self.nodes: dict[int, ast.AST] = {}
        for parent in ast.walk(tree):
            self.nodes[id(parent)] = parent
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
        self.def_of_target = {id(d.node): d.key for d in flow.defs if d.how in ("assign", "walrus")}
        self.uses: dict[int, list[ast.AST]] = {}  # def key -> the Name/Attribute nodes it reaches
        for node, preds in flow.preds.items():
            if node[0] != "use" or node[1] not in self.nodes:
                continue
            for p in preds:
                if p[0] == "def":
                    self.uses.setdefault(p[1], []).append(self.nodes[node[1]])

    def guard(self, node: ast.AST, hops: int = 0) -> tuple[Guard, ast.AST] | None:
        """The guard discarding ``node``'s value and the guarding node, or None."""
        child = node
        parent = self.parents.get(id(child))
        receiver: ast.AST | None = None  # ``child`` is ``receiver.method``: a method call's receiver
        while isinstance(parent, ast.expr):
            hit = self._guard_at(parent, child, receiver)
            if hit is not None:
                return hit, parent
            receiver = child if isinstance(parent, ast.Attribute) and parent.value is child else None
            if isinstance(parent, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                return None
            child, parent = parent, self.parents.get(id(parent))
        if hops >= _HOPS or not isinstance(parent, (ast.Assign, ast.AnnAssign)) or child is not parent.value:
            return None
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        for t in targets:
            key = self.def_of_target.get(id(t)) if isinstance(t, ast.Name) else None
            for use in self.uses.get(key, []) if key is not None else []:
                hit = self.guard(use, hops + 1)
                if hit is not None:
                    return hit
        return None

    def _guard_at(self, parent: ast.expr, child: ast.AST, receiver: ast.AST | None) -> Guard | None:
        line = getattr(parent, "lineno", 0)
        if isinstance(parent, ast.Subscript):
            if child is not parent.value or not _is_mask(parent.slice, self.flow):
                return None
            if isinstance(parent.ctx, ast.Store):
                # ``y[~ok] = 0``: the entries the mask selects are overwritten, the others kept.
                return Guard(f"the masked assignment on line {line}", _text(parent.slice), False)
            return Guard(f"the boolean indexing on line {line}", _text(parent.slice), True)
        if not isinstance(parent, ast.Call) or any(isinstance(a, ast.Starred) for a in parent.args):
            return None
        qn = self.resolver.qualified_name(parent.func)
        args = parent.args
        if qn == "torch.where" and len(args) == 3 and child in args[1:]:
            return Guard(f"torch.where on line {line}", _text(args[0]), child is args[1])
        if qn in ("torch.masked_fill",) and len(args) >= 2 and child is args[0]:
            return Guard(f"torch.masked_fill on line {line}", _text(args[1]), False)
        if qn in ("torch.nan_to_num",) and args and child is args[0]:
            return Guard(f"torch.nan_to_num on line {line}")
        f = parent.func
        if qn is not None or not isinstance(f, ast.Attribute):
            return None
        on_receiver = child is f and receiver is f.value
        if f.attr == "where" and len(args) == 2 and (on_receiver or child is args[1]):
            return Guard(f"Tensor.where on line {line}", _text(args[0]), on_receiver)
        if f.attr in ("masked_fill", "masked_fill_") and args and on_receiver:
            return Guard(f"Tensor.{f.attr} on line {line}", _text(args[0]), False)
        if f.attr in ("nan_to_num", "nan_to_num_") and on_receiver:
            return Guard(f"Tensor.{f.attr} on line {line}")
        return None


def _eligible(c: Candidate) -> bool:
    """Elementwise torch ops decided by value (math./numpy ops have no gradient to break)."""
    region = KINDS[c.site.kind].region
    return c.site.op.startswith("torch.") and region.shape is None and not region.allows_neg_inf_operand


def mark_where_branches(
    candidates: list[Candidate], tree: ast.Module, flow: DataFlow, resolver: Resolver
) -> None:
    """Set ``Site.discarded_by`` on every candidate whose value a guard discards downstream."""
    todo = [c for c in candidates if _eligible(c)]
    if not todo:
        return
    finder = _Finder(tree, flow, resolver)
    for c in todo:
        try:
            hit = finder.guard(c.node)
        except RecursionError:
            hit = None
        if hit is not None:
            c.site = dataclasses.replace(c.site, discarded_by=hit[0].words)


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
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
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
        hit = _Finder(tree, flow, Resolver(flow)).guard(node)
    except RecursionError:
        return None
    return hit[0] if hit is not None else None
