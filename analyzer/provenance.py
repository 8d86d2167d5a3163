"""What may flow into a tensor: zero elements, or -inf entries.

Two kinds are NaN only for operands that programs make on purpose, so they are
sites only when such an operand may reach them (reporting every ``.mean()`` and
every softmax buried the real findings):

* a mean of zero elements (``Provenance.may_be_empty``). A tensor has zero
  elements, in practice, only after a data-dependent selection: boolean-mask
  indexing (``x[mask]``, ``x[x > 0]``), the producers in
  ``catalogue.EMPTY_SOURCES`` (``masked_select``, ``nonzero``, one-argument
  ``torch.where`` ...), indexing with indices they give, slicing with computed
  bounds (``x[:n]``), and concatenating a list built at run time;
* a softmax of a row that is entirely -inf (``Provenance.may_hold_neg_inf``):
  the operand may hold -inf only if a -inf constant flows into it
  (``masked_fill(mask, float("-inf"))``, ``torch.full(..., -math.inf)``,
  ``x[pad] = -torch.inf``). A large finite fill (``-1e9``, ``finfo.min``) is
  not -inf, and a row of it gives a uniform softmax, not NaN.

The walk follows the dataflow graph: names and ``self.x`` through their
reaching definitions, private functions' parameters through the arguments
in-file calls pass, in-file calls through their returns, and tensors through
the ops applied to them (elementwise ops, views, reductions along a dim,
broadcasting with another operand). A parameter with no known arguments is a
tensor of unknown shape, assumed non-empty and finite; but indexing with an
index of unknown type (``x[idx]`` with ``idx`` a parameter) may be a mask, so
it may select nothing. Answers are short words for the verdict's reason, or None.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from grist_lsp.analyzer.catalogue import EMPTY_SOURCES, MASK_PRODUCERS
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.ranges import INF, NOT_TENSOR, RangeAnalysis

_TENSOR_ROOTS = ("torch.", "numpy.")
# Called with no arguments these reduce everything to one value (or a number): never empty.
_FULL_REDUCTIONS = frozenset({"sum", "nansum", "prod", "mean", "nanmean", "max", "min", "amax", "amin", "std",
                              "var", "norm", "all", "any", "count_nonzero", "logsumexp", "median", "nanmedian",
                              "numel", "item", "size", "dim", "tolist"})
_MASK_OPERATORS = (ast.BitAnd, ast.BitOr, ast.BitXor)
_DEPTH = 40  # dataflow hops before giving up (as "not known to be empty")


def _words(e: ast.AST) -> str:
    try:
        text = ast.unparse(e)
    except Exception:  # unparse is best effort on odd trees; words only
        return "a selection"
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Provenance:
    flow: DataFlow
    resolver: Resolver
    ranges: RangeAnalysis
    _memo: dict[tuple[str, int], str | None] = field(default_factory=dict)
    _active: set[tuple[str, int]] = field(default_factory=set)

    # --- entry points ------------------------------------------------------------

    def may_be_empty(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may have zero elements, or None."""
        return self._guarded("empty", e, self._empty)

    def may_select_nothing(self, index: ast.AST | None) -> str | None:
        """Words on how indexing with ``index`` may select nothing, or None."""
        return self._guarded("select", index, self._select)

    def may_hold_neg_inf(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may hold -inf entries, or None."""
        return self._guarded("neginf", e, self._neg_inf)

    def _guarded(self, what: str, e: ast.AST | None, compute) -> str | None:  # type: ignore[no-untyped-def]
        if e is None:
            return None
        key = (what, id(e))
        if key in self._memo:
            return self._memo[key]
        if key in self._active or len(self._active) > _DEPTH:
            return None  # a cycle (a loop redefining a name) adds nothing new
        self._active.add(key)
        try:
            got = compute(e)
        finally:
            self._active.discard(key)
        self._memo[key] = got
        return got

    def _first(self, exprs) -> str | None:  # type: ignore[no-untyped-def]
        return self._first_of(exprs, self.may_be_empty)

    # --- tensors -----------------------------------------------------------------

    def _empty(self, e: ast.AST) -> str | None:
        if isinstance(e, ast.Subscript):
            if self.ranges.fact(e.value).pytype in NOT_TENSOR:
                return None  # batch["x"], outputs[i]: an element of a container
            sel = self.may_select_nothing(e.slice)
            return sel if sel is not None else self.may_be_empty(e.value)
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.BinOp):
            return self._first([e.left, e.right])  # broadcasting with an empty tensor is empty
        if isinstance(e, ast.Compare):
            return self._first([e.left, *e.comparators])
        if isinstance(e, ast.UnaryOp):
            return self.may_be_empty(e.operand)
        if isinstance(e, ast.IfExp):
            return self._first([e.body, e.orelse])
        if isinstance(e, (ast.List, ast.Tuple)):
            return self._first(x.value if isinstance(x, ast.Starred) else x for x in e.elts)
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return self.may_be_empty(e.elt)
        if isinstance(e, ast.NamedExpr):
            return self.may_be_empty(e.value)
        if isinstance(e, (ast.Name, ast.Attribute)) and self.flow.is_use(e):
            for d in self.flow.defs_reaching(e):
                got = self._def(d, self.may_be_empty)
                if got is not None:
                    return got
        return None

    def _def(self, d: Def, ask) -> str | None:  # type: ignore[no-untyped-def]
        """``ask`` (may_be_empty, may_select_nothing or may_hold_neg_inf) of the value a
        definition binds; for may_select_nothing, "unknown" when nothing says what it is."""
        how = d.how
        if how in ("assign", "walrus", "attr"):
            return ask(d.value)
        if how == "unpack":
            v = d.value
            for i in d.path:  # `a, b = x[m], y`: the element; `rows, cols = torch.where(c)`: the call
                if isinstance(v, (ast.Tuple, ast.List)) and i < len(v.elts) and not any(
                        isinstance(x, ast.Starred) for x in v.elts):
                    v = v.elts[i]
                else:
                    break
            return ask(v)
        if how == "aug":
            s = d.value
            assert isinstance(s, ast.AugAssign)
            return ask(s.value) or ask(s.target)
        if how == "mutate" and d.value is not None:
            got = ask(d.value)  # x[pad] = -inf, x.masked_fill_(m, -inf): what is written
            if got is not None:
                return got
        if how in ("mutate", "refine"):
            # x[m] = 0, x.clamp_(...), zeros_(x), a guard: the same tensor as before, same shape
            node = d.node
            priors = [node]
            if isinstance(node, ast.Call):
                receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
                priors = [n for n in (receiver, *node.args[:1]) if isinstance(n, ast.Name) and n.id == d.name]
            for prior in priors:
                for p in self.flow.defs_reaching(prior):
                    got = self._def(p, ask)
                    if got is not None:
                        return got
            return None
        if how == "param":
            return self._param(d, ask)
        if how == "for" and isinstance(d.value, (ast.List, ast.Tuple)) and not d.path:
            return self._first_of(d.value.elts, ask)
        if how in ("import", "function", "class"):
            return None
        return "unknown" if ask == self.may_select_nothing else None

    def _param(self, d: Def, ask) -> str | None:  # type: ignore[no-untyped-def]
        info = self.flow.function_info(d.owner)
        args = list(self.flow.param_arguments(d))
        if d.value is not None:
            args.append(d.value)
        name = getattr(d.owner, "name", "<lambda>")
        private = name.startswith("_") and not name.startswith("__") or name == "<lambda>"
        # Only a private function's in-file callers say everything it receives.
        known = info is not None and not info.open_params and not info.escapes and private and args
        got = self._first_of(args, ask)
        if got is not None or known:
            return got
        # A tensor parameter of unknown shape is assumed non-empty and finite; an index
        # parameter of unknown type may be a boolean mask.
        return "unknown" if ask == self.may_select_nothing else None

    @staticmethod
    def _first_of(exprs, ask) -> str | None:  # type: ignore[no-untyped-def]
        for x in exprs:
            got = ask(x)
            if got is not None:
                return got
        return None

    def _call(self, call: ast.Call) -> str | None:
        callee = self.flow.callee(call)
        if callee is not None:
            if getattr(callee, "name", None) == "__init__":
                return None
            return self._first(self.flow.returns_of(callee))
        qn = self.resolver.qualified_name(call.func)
        receiver = None
        if qn is not None:
            if not qn.startswith(_TENSOR_ROOTS):
                return None  # another library's function: nothing known
            name = qn.rsplit(".", 1)[-1]
            args = list(call.args)
        else:
            receiver = self.ranges.method_receiver(call)
            if receiver is None:
                return None  # a module's or an object's call (self.fc(x)): nothing known
            name = call.func.attr  # type: ignore[union-attr]
            args = [receiver, *call.args]
        source = EMPTY_SOURCES.get(name)
        if source is not None and (source.max_args is None or len(args) <= source.max_args):
            if not source.runtime_list:
                return f"{source.words}: {_words(call)}"
            if args and self._runtime_list(args[0]):
                return f"{source.words}: {_words(call)}"
        if name in _FULL_REDUCTIONS and len(args) <= 1 and not call.keywords:
            return None
        return self._first(a.value if isinstance(a, ast.Starred) else a for a in args)

    def _runtime_list(self, e: ast.AST) -> bool:
        """A list whose length is decided at run time: a filtered comprehension, or a
        named list (appended to in a loop: its length is not in the source)."""
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return any(g.ifs for g in e.generators)
        if isinstance(e, ast.Name) and self.flow.is_use(e):
            return any(d.how in ("assign", "attr") and isinstance(d.value, ast.List)
                       for d in self.flow.defs_reaching(e))
        return False

    # --- -inf entries ----------------------------------------------------------------

    def _neg_inf(self, e: ast.AST) -> str | None:
        fact = self.ranges.fact(e)
        if fact.is_point and fact.hi == -INF:
            return f"a -inf constant: {_words(e)}"
        if fact.lo == -INF and fact.hi < 0 and all(isinstance(n, (ast.Constant, ast.UnaryOp, ast.USub, ast.UAdd))
                                                   for n in ast.walk(e)):
            # -1e9 is a safe fill in float32 but rounds to -inf in float16 (the range is rounded
            # outward to the file's dtype, so a literal beyond its max has no finite lower end)
            return f"{_words(e)}, which is -inf in {self.ranges.dtype}"
        if isinstance(e, ast.Constant):
            return None
        if isinstance(e, (ast.Name, ast.Attribute)) and self.flow.is_use(e):
            for d in self.flow.defs_reaching(e):
                got = self._def(d, self.may_hold_neg_inf)
                if got is not None:
                    return got
            return None
        if isinstance(e, ast.Call):
            callee = self.flow.callee(e)
            if callee is not None:
                return None if getattr(callee, "name", None) == "__init__" else self._first_of(
                    self.flow.returns_of(callee), self.may_hold_neg_inf)
            qn = self.resolver.qualified_name(e.func)
            if qn is None and self.ranges.method_receiver(e) is None:
                return None  # self.fc(x): a module's output
            if qn is not None and not qn.startswith(_TENSOR_ROOTS + ("builtins.",)):
                return None
            # masked_fill(m, -inf), full(shape, -inf), where(c, x, -inf): from any operand
            receiver = [e.func.value] if qn is None else []  # type: ignore[union-attr]
            parts = [*receiver, *e.args, *(k.value for k in e.keywords)]
            return self._first_of((a.value if isinstance(a, ast.Starred) else a for a in parts),
                                  self.may_hold_neg_inf)
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.IfExp, ast.List, ast.Tuple, ast.Subscript, ast.NamedExpr)):
            children = [c for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)]
            if isinstance(e, ast.Subscript):
                children = [e.value]  # the index says where, not what
            return self._first_of(children, self.may_hold_neg_inf)
        return None

    # --- indices -----------------------------------------------------------------

    def _select(self, s: ast.AST) -> str | None:
        if isinstance(s, ast.Slice):
            for bound in (s.lower, s.upper):
                if bound is not None and self.ranges.fact(bound).is_point is False:
                    return f"slicing with computed bounds: [{_words(s)}]"
            return None
        if isinstance(s, ast.Tuple):
            return self._first_of(s.elts, self.may_select_nothing)
        if isinstance(s, ast.Constant) or self.ranges.fact(s).pytype in ("num", "str", "none"):
            return None  # x[0], x[i] with i a number, x[None]
        if isinstance(s, (ast.Compare, ast.BoolOp)) or (
                isinstance(s, ast.UnaryOp) and isinstance(s.op, (ast.Not, ast.Invert))) or (
                isinstance(s, ast.BinOp) and isinstance(s.op, _MASK_OPERATORS)):
            return f"boolean-mask indexing with {_words(s)}"
        if isinstance(s, ast.Starred):
            return None
        if isinstance(s, (ast.ListComp, ast.GeneratorExp)):
            return f"indexing with a comprehension: {_words(s)}"
        if isinstance(s, ast.Call):
            empty = self.may_be_empty(s)
            if empty is not None:
                return f"indexing with {empty}"
            if self._mask_call(s):
                return f"boolean-mask indexing with {_words(s)}"
            if self.flow.callee(s) is not None:
                return self._first_of(self.flow.returns_of(self.flow.callee(s)), self.may_select_nothing)
            qn = self.resolver.qualified_name(s.func)
            if qn is not None and not qn.startswith(_TENSOR_ROOTS + ("builtins.",)):
                return f"indexing with {_words(s)} (of unknown type)"
            return None  # torch.arange(n), x.argmax(1), randperm(n): indices, some always
        if isinstance(s, ast.BinOp):
            return self._first(x for x in (s.left, s.right))  # idx + 1 with idx from nonzero()
        if isinstance(s, ast.Subscript):
            empty = self.may_be_empty(s)
            if empty is not None:
                return f"indexing with {empty}"
            return self.may_select_nothing(s.value)  # masks[i]: a row of masks
        if isinstance(s, (ast.Name, ast.Attribute)):
            if self.flow.is_use(s):
                for d in self.flow.defs_reaching(s):
                    got = self._def(d, self.may_select_nothing)
                    if got is not None:
                        return got if got != "unknown" else f"indexing with {_words(s)} (maybe a boolean mask)"
                return None
            if self.resolver.qualified_name(s) is None:
                return f"indexing with {_words(s)} (maybe a boolean mask)"  # batch.mask
        return None

    def _mask_call(self, call: ast.Call) -> bool:
        qn = self.resolver.qualified_name(call.func)
        if qn is not None:
            return qn.startswith(_TENSOR_ROOTS) and qn.rsplit(".", 1)[-1] in MASK_PRODUCERS
        return self.ranges.method_receiver(call) is not None and call.func.attr in MASK_PRODUCERS  # type: ignore[union-attr]
