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
* arithmetic on an infinity (``Provenance.may_hold_inf``): ``0 * -inf`` and ``inf - inf``
  are NaN, so a product, sum or contraction is a site when an operand may hold an infinity
  the program put there (the same constants as below, of either sign). Ops whose output is
  finite whatever their input (softmax, sigmoid, nan_to_num, comparisons) stop the walk;
* a softmax of a row that is entirely -inf (``Provenance.may_hold_neg_inf``):
  the operand may hold -inf only if a -inf constant flows into it
  (``masked_fill(mask, float("-inf"))``, ``torch.full(..., -math.inf)``,
  ``x[pad] = -torch.inf``). A large finite fill (``-1e9``, ``finfo.min``) is
  not -inf, and a row of it gives a uniform softmax, not NaN. The -inf stay
  harmless when the program keeps one entry per row out of the fill itself
  (``Provenance.softmax_row_risk``): a mask that it first un-masks for fully
  masked rows (``mask = mask | ~mask.any(-1, keepdim=True)``, ``mask[..., 0] =
  True``) before ``masked_fill(~mask, -inf)`` or ``where(mask, s, -inf)``, the
  softmax taken along that same (negative) dimension.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from grist_lsp.analyzer.catalogue import EMPTY_SOURCES, MASK_PRODUCERS
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.list_growth import ListGrowth
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.positions import int_literal, node_words
from grist_lsp.analyzer.ranges import INF, NOT_TENSOR, RangeAnalysis

_TENSOR_ROOTS = ("torch.", "numpy.")
# Called with no arguments these reduce everything to one value (or a number): never empty.
_FULL_REDUCTIONS = frozenset(
    {
        "sum",
        "nansum",
        "prod",
        "mean",
        "nanmean",
        "max",
        "min",
        "amax",
        "amin",
        "std",
        "var",
        "norm",
        "all",
        "any",
        "count_nonzero",
        "logsumexp",
        "median",
        "nanmedian",
        "numel",
        "item",
        "size",
        "dim",
        "tolist",
    }
)
# Torch ops whose output holds no infinity whatever their input holds: an intended -inf or +inf
# stops there (softmax(masked) is finite; a log of its zeros is the log site's own finding).
_FINITE_OUTPUTS = frozenset(
    {
        "softmax",
        "sigmoid",
        "tanh",
        "nan_to_num",
        "isinf",
        "isnan",
        "isfinite",
        "isneginf",
        "isposinf",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "argmax",
        "argmin",
        "logical_not",
        "logical_and",
        "logical_or",
        "sign",
    }
)
_FINITE_FROM_NEG_INF = frozenset({"exp", "exp2", "relu"})  # 0 at -inf (but inf at +inf)
# Methods that replace the receiver's values (or make a new tensor of its kind): its infinities are gone.
_REPLACES_VALUES = frozenset(
    {
        "uniform_",
        "normal_",
        "zero_",
        "fill_",
        "random_",
        "exponential_",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
    }
)
_MASK_OPERATORS = (ast.BitAnd, ast.BitOr, ast.BitXor)
_DEPTH = 40  # dataflow hops before giving up (as "not known to be empty")
# One of the questions asked of an expression (may_be_empty, may_select_nothing, may_hold_neg_inf):
# words on how the answer can be yes, or None.
_Ask = Callable[[ast.AST | None], str | None]


def _words(e: ast.AST) -> str:
    return node_words(e, "a selection")


_SIZED = frozenset({"empty", "zeros", "ones", "rand", "randn"})  # every positional argument a size
_FROM_DATA = frozenset({"tensor", "as_tensor", "array", "asarray", "Tensor", "FloatTensor", "LongTensor"})


def _made_empty(name: str, args: list[ast.expr]) -> bool:
    """``torch.empty(0, d)``, ``torch.zeros((0,))``, ``torch.full((0, d), v)``, ``torch.tensor([])``:
    a tensor made with no elements, to be filled (or not) later."""
    if name in _FROM_DATA:
        return bool(args) and isinstance(args[0], (ast.List, ast.Tuple)) and not args[0].elts
    sizes = args if name in _SIZED else args[:1] if name == "full" else []
    flat = [x for a in sizes for x in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
    return any(int_literal(x) == 0 for x in flat)


@dataclass
class Provenance:
    flow: DataFlow
    resolver: Resolver
    ranges: RangeAnalysis
    growth: ListGrowth = field(init=False)
    _memo: dict[tuple[str, int], str | None] = field(default_factory=dict)
    _active: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.growth = ListGrowth(self.flow.tree, lambda it: self.may_be_empty(it) is not None)

    # --- entry points ------------------------------------------------------------

    def may_be_empty(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may have zero elements, or None."""
        return self.asked("empty", e, self._empty)

    def may_select_nothing(self, index: ast.AST | None) -> str | None:
        """Words on how indexing with ``index`` may select nothing, or None."""
        return self.asked("select", index, self._select)

    def may_hold_neg_inf(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may hold -inf entries, or None."""
        return self.asked("-inf", e, lambda x: self._infinite(x, -1))

    def may_hold_pos_inf(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may hold +inf entries, or None."""
        return self.asked("+inf", e, lambda x: self._infinite(x, 1))

    def may_hold_inf(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may hold an infinity of either sign, or None."""
        return self.may_hold_neg_inf(e) or self.may_hold_pos_inf(e)

    def may_hold_inf_of_sign(self, e: ast.AST | None, sign: int) -> str | None:
        """``may_hold_pos_inf`` for ``sign`` 1, ``may_hold_neg_inf`` for -1."""
        return self._ask_sign(sign)(e)

    def _ask_sign(self, sign: int) -> _Ask:
        return self.may_hold_neg_inf if sign < 0 else self.may_hold_pos_inf

    def softmax_row_risk(self, operand: ast.AST | None, call: ast.AST) -> str | None:
        """Words on how a row of ``operand`` along the dimension the softmax ``call`` normalises
        may be entirely -inf, or None (no -inf, or every row keeps a finite entry)."""
        plus = self.may_hold_pos_inf(operand)
        if plus is not None:
            return plus  # one +inf makes its whole row NaN
        why = self.may_hold_neg_inf(operand)
        if why is None or operand is None or not isinstance(call, ast.Call):
            return why
        dim = _softmax_dim(call, self.resolver.qualified_name(call.func) is None)
        if dim is None or dim >= 0:  # a positive dimension depends on the rank, unknown here
            return why
        return None if self._rows_keep_finite(operand, dim, 0) else why

    def asked(self, what: str, e: ast.AST | None, compute: Callable[[ast.AST], str | None]) -> str | None:
        """``compute(e)`` for the question ``what`` (``"empty"``, ``"-inf"``; analyzer/precision.py
        asks ``"float16"``), memoised per expression, with cycles (a loop redefining a name) and
        walks deeper than ``_DEPTH`` answered None."""
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

    def _first(self, exprs: Iterable[ast.AST]) -> str | None:
        return self.first_of(exprs, self.may_be_empty)

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
                got = self.through_def(d, self.may_be_empty)
                if got is not None:
                    return got
        return None

    def through_def(self, d: Def, ask: _Ask) -> str | None:
        """``ask`` (may_be_empty, may_select_nothing or may_hold_neg_inf) of the value a
        definition binds; for may_select_nothing, "unknown" when nothing says what it is."""
        how = d.how
        if how in ("assign", "walrus", "attr"):
            return ask(d.value)
        if how == "unpack":
            # `a, b = x[m], y`: the element; `rows, cols = torch.where(c)`: the call
            return ask(d.unpacked()[0])
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
                    key = ("prior", p.key)
                    if key in self._active:
                        continue  # a guard inside a loop reaches itself through the back edge
                    self._active.add(key)
                    try:
                        got = self.through_def(p, ask)
                    finally:
                        self._active.discard(key)
                    if got is not None:
                        return got
            return None
        if how == "param":
            return self._param(d, ask)
        if how == "for" and isinstance(d.value, (ast.List, ast.Tuple)) and not d.path:
            return self.first_of(d.value.elts, ask)
        if how in ("import", "function", "class"):
            return None
        return "unknown" if ask == self.may_select_nothing else None

    def _param(self, d: Def, ask: _Ask) -> str | None:
        info = self.flow.function_info(d.owner)
        args: list[ast.AST] = list(self.flow.param_arguments(d))
        if d.value is not None:
            args.append(d.value)
        name = getattr(d.owner, "name", "<lambda>")
        private = name.startswith("_") and not name.startswith("__") or name == "<lambda>"
        # Only a private function's in-file callers say everything it receives.
        known = info is not None and not info.open_params and not info.escapes and private and args
        got = self.first_of(args, ask)
        if got is not None or known:
            return got
        # A tensor parameter of unknown shape is assumed non-empty and finite; an index
        # parameter of unknown type may be a boolean mask.
        return "unknown" if ask == self.may_select_nothing else None

    @staticmethod
    def first_of(exprs: Iterable[ast.AST], ask: _Ask) -> str | None:
        """The first answer of ``ask`` over ``exprs`` that is not None."""
        for x in exprs:
            got = ask(x)
            if got is not None:
                return got
        return None

    def _call(self, call: ast.Call) -> str | None:
        returned = self.flow.returned(call)
        if returned is not None:
            return self._first(returned)
        qn = self.resolver.qualified_name(call.func)
        receiver = None
        if qn is not None:
            if not qn.startswith(_TENSOR_ROOTS):
                return None  # another library's function: nothing known
            name = qn.rsplit(".", 1)[-1]
            args = list(call.args)
            if _made_empty(name, args):
                return f"made with no elements: {_words(call)}"
        else:
            receiver = self.ranges.method_receiver(call)
            if receiver is None or not isinstance(call.func, ast.Attribute):  # a receiver means x.name(...)
                return None  # a module's or an object's call (self.fc(x)): nothing known
            name = call.func.attr
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
        """A list that may be empty at run time: a filtered comprehension, or a named list that
        starts empty and grows only under a condition (``list_growth``) or in other methods."""
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return any(g.ifs for g in e.generators)
        if isinstance(e, ast.Name) and self.flow.is_use(e):
            return any(
                d.how in ("assign", "attr")
                and isinstance(d.value, ast.List)
                and not d.value.elts
                and (d.how == "attr" or self.growth.may_stay_empty(d.value, d.name, e))
                for d in self.flow.defs_reaching(e)
            )
        return False

    # --- -inf entries ----------------------------------------------------------------

    def _infinite(self, e: ast.AST, sign: int) -> str | None:
        """How ``e`` may hold infinities of ``sign`` (-1, +1): a constant that is one, flowing in
        through names, the file's calls, and torch ops that keep it (not through those whose
        output is finite: ``_FINITE_OUTPUTS``); a negation turns one sign into the other."""
        ask, opposite = self._ask_sign(sign), self._ask_sign(-sign)
        fact = self.ranges.fact(e)
        if fact.is_point and fact.hi == sign * INF:
            return f"{'an ' if sign > 0 else 'a -'}inf constant: {_words(e)}"
        literal = all(isinstance(n, (ast.Constant, ast.UnaryOp, ast.USub, ast.UAdd)) for n in ast.walk(e))
        if literal and (
            (sign < 0 and fact.lo == -INF and fact.hi < 0) or (sign > 0 and fact.hi == INF and fact.lo > 0)
        ):
            # -1e9 is a safe fill in float32 but rounds to -inf in float16 (the range is rounded
            # outward to the file's dtype, so a literal beyond its max has no finite end)
            return f"{_words(e)}, which is {'' if sign > 0 else '-'}inf in {self.ranges.dtype}"
        if isinstance(e, ast.Constant):
            return None
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Call):
            return ask(e.value)  # x.max(-1).values, f(x).T: the call's tensor
        if isinstance(e, (ast.Name, ast.Attribute)) and self.flow.is_use(e):
            for d in self.flow.defs_reaching(e):
                got = self.through_def(d, ask)
                if got is not None:
                    return got
            return None
        if isinstance(e, ast.Call):
            return self._infinite_call(e, sign)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            return opposite(e.operand)
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            right = opposite if isinstance(e.op, ast.Sub) else ask
            return ask(e.left) or right(e.right)
        if isinstance(e, ast.BinOp):
            # a product or quotient: the sign the other factor gives, when the ranges know it
            return self._scaled(e.left, e.right, sign) or (
                None if isinstance(e.op, ast.Div) else self._scaled(e.right, e.left, sign)
            )
        if isinstance(e, (ast.UnaryOp, ast.IfExp, ast.List, ast.Tuple, ast.Subscript, ast.NamedExpr)):
            children = [c for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)]
            if isinstance(e, ast.Subscript):
                children = [e.value]  # the index says where, not what
            return self.first_of(children, ask)
        return None

    def _scaled(self, factor: ast.AST, by: ast.AST, sign: int) -> str | None:
        """How ``factor`` times (or over) ``by`` may hold infinities of ``sign``."""
        scale = self.ranges.fact(by)
        if scale.lo > 0:
            return self._ask_sign(sign)(factor)
        if scale.hi < 0:
            return self._ask_sign(-sign)(factor)
        return self.may_hold_inf(factor)

    def _infinite_call(self, e: ast.Call, sign: int) -> str | None:
        ask = self._ask_sign(sign)
        returned = self.flow.returned(e)
        if returned is not None:
            return self.first_of(returned, ask)
        qn = self.resolver.qualified_name(e.func)
        if qn is None and self.ranges.method_receiver(e) is None:
            return None  # self.fc(x): a module's output
        if qn is not None and not qn.startswith(_TENSOR_ROOTS + ("builtins.",)):
            return None
        name = qn.rsplit(".", 1)[-1] if qn is not None else getattr(e.func, "attr", "")
        if name in _FINITE_OUTPUTS or (sign < 0 and name in _FINITE_FROM_NEG_INF):
            return None
        if name in ("neg", "negative"):
            ask = self._ask_sign(-sign)
        # masked_fill(m, -inf), full(shape, -inf), where(c, x, -inf): from any operand; but a
        # tensor whose values a call replaces (zeros_like(x), x.new_zeros(n), x.uniform_(0, 1))
        # gives it its shape only
        shape_only = name.endswith("_like") or name in _REPLACES_VALUES
        receiver = (
            [e.func.value] if qn is None and isinstance(e.func, ast.Attribute) and not shape_only else []
        )
        args = e.args[1:] if shape_only and qn is not None else e.args
        parts = [*receiver, *args, *(k.value for k in e.keywords)]
        return self.first_of((a.value if isinstance(a, ast.Starred) else a for a in parts), ask)

    # --- rows that keep a finite entry --------------------------------------------------

    def _rows_keep_finite(self, e: ast.AST, dim: int, depth: int) -> bool:
        """Every row of ``e`` along ``dim`` (negative) has an entry that is not -inf."""
        if self.may_hold_neg_inf(e) is None:
            return True
        if depth > _DEPTH:
            return False
        if isinstance(e, ast.Name) and self.flow.is_use(e):
            defs = self.flow.defs_reaching(e)
            return bool(defs) and all(self._def_rows_keep_finite(d, dim, depth + 1) for d in defs)
        if isinstance(e, ast.Subscript) and dim == -1 and self._additive_causal(e, depth + 1):
            return True
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Div, ast.Mult)):
            # scaling by a positive number keeps finite entries finite and -inf entries -inf
            return self.ranges.fact(e.right).lo > 0 and self._rows_keep_finite(e.left, dim, depth + 1)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            # scores + mask with finite scores: the mask's finite entries stay finite
            return any(
                self.may_hold_neg_inf(a) is None and self._rows_keep_finite(b, dim, depth + 1)
                for a, b in ((e.left, e.right), (e.right, e.left))
            )
        if not isinstance(e, ast.Call):
            return False
        name, receiver, args = self._tensor_call(e)
        if name == "log" and dim == -1:
            inner = receiver if receiver is not None else (args[0] if args else None)
            if inner is not None and self.causal(inner):
                return True  # log of a 0/1 lower triangle: log(1) = 0 at column 0 of every row
        kw = {k.arg: k.value for k in e.keywords}
        if name in ("masked_fill", "masked_fill_"):
            parts = ([receiver] if receiver is not None else []) + args
            recv = parts[0] if parts else kw.get("input")
            mask = parts[1] if len(parts) > 1 else kw.get("mask")
            value = parts[2] if len(parts) > 2 else kw.get("value")
            if recv is None or mask is None or value is None or self.may_hold_neg_inf(recv) is not None:
                return False
            return self.may_hold_neg_inf(value) is None or self._spares_row(mask, dim, depth + 1)
        if name == "where" and receiver is None and len(args) == 3 and not kw:
            cond, a, b = args
            a_inf, b_inf = self.may_hold_neg_inf(a), self.may_hold_neg_inf(b)
            if a_inf is None and b is not None and self._has_true_per_row(cond, dim, depth + 1):
                return True  # where(keep, scores, -inf): each row takes one score
            return b_inf is None and self._spares_row(cond, dim, depth + 1)
        return False

    def causal(self, e: ast.AST) -> bool:
        """``e`` is a 0/1 lower triangle (``tril(ones(n, n))``, sliced to ``[:T, :T]``, viewed,
        converted, registered as a buffer): every row along the last dimension has a 1 in
        column 0, so a mask made from it never masks a whole row."""
        return self._causal_base(e, 0) is not None

    def _causal_base(self, e: ast.AST, depth: int) -> ast.Call | None:
        """The ``ones(...)`` call the lower triangle ``e`` is made of (its last size is the rows'
        length), or None."""
        if depth > _DEPTH:
            return None
        if isinstance(e, ast.Subscript):
            elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            kept = all(
                isinstance(x, ast.Slice)
                or int_literal(x) is not None
                or (isinstance(x, ast.Constant) and x.value in (None, Ellipsis))
                for x in elts
            )
            last = elts[-1]
            keeps_column_0 = not isinstance(e.slice, ast.Tuple) or (
                isinstance(last, ast.Slice)
                and (last.lower is None or int_literal(last.lower) == 0)
                and last.step is None
            )
            return self._causal_base(e.value, depth + 1) if kept and keeps_column_0 else None
        if isinstance(e, (ast.Name, ast.Attribute)):
            value = self._buffer(e) if isinstance(e, ast.Attribute) else None
            if value is not None:
                return self._causal_base(value, depth + 1)
            if not self.flow.is_use(e):
                return None
            defs = self.flow.defs_reaching(e)
            bases = [
                self._causal_base(d.value, depth + 1)
                if d.how in ("assign", "walrus", "attr") and d.value
                else None
                for d in defs
            ]
            return bases[0] if defs and all(b is not None for b in bases) else None
        if not isinstance(e, ast.Call):
            return None
        callee = self.flow.callee(e)
        if callee is not None:
            rets = [self._causal_base(r, depth + 1) for r in self.flow.returns_of(callee)]
            return rets[0] if rets and all(r is not None for r in rets) else None
        name, receiver, args = self._tensor_call(e)
        if name == "tril":
            inner = receiver if receiver is not None else (args[0] if args else None)
            diagonal = next((k.value for k in e.keywords if k.arg == "diagonal"), None)
            rest = args if receiver is not None else args[1:]
            diagonal = diagonal if diagonal is not None else (rest[0] if rest else None)
            if diagonal is not None and (int_literal(diagonal) is None or (int_literal(diagonal) or 0) < 0):
                return None
            return self._ones(inner)
        if receiver is None:
            return None
        if name in _SAME_ROWS:
            return self._causal_base(receiver, depth + 1)
        if name in ("view", "reshape") and args:
            base = self._causal_base(receiver, depth + 1)
            sizes = [a for a in base.args if not isinstance(a, ast.Starred)] if base is not None else []
            return base if base is not None and sizes and self.ranges.same(args[-1], sizes[-1]) else None
        if name == "unsqueeze" and len(args) == 1 and (int_literal(args[0]) or 0) >= 0:
            return self._causal_base(receiver, depth + 1)
        return None

    def _ones(self, e: ast.AST | None) -> ast.Call | None:
        """``e`` when it is ``torch.ones(rows, cols)`` (a literal size list), else None."""
        if not isinstance(e, ast.Call) or self.resolver.qualified_name(e.func) != "torch.ones":
            return None
        sizes = [a for a in e.args if not isinstance(a, ast.Starred)]
        return e if len(sizes) >= 2 and len(sizes) == len(e.args) else None

    def _buffer(self, e: ast.Attribute) -> ast.expr | None:
        """The value ``self.register_buffer("name", value)`` gives ``self.name``, when the file
        registers that name exactly once."""
        if not isinstance(e.value, ast.Name):
            return None
        found = [
            node.args[1]
            for node, _ in self.flow.operations
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == e.attr
        ]
        return found[0] if len(found) == 1 else None

    def _additive_causal(self, e: ast.AST, depth: int) -> bool:
        """``e`` is ``log(C)`` of a lower triangle ``C``, read through slices that keep column 0 and
        through a registered buffer or an in-file function (``self.mask[:T, :T]``)."""
        if depth > _DEPTH:
            return False
        if isinstance(e, ast.Subscript):
            elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            last = elts[-1]
            if isinstance(e.slice, ast.Tuple) and not (
                isinstance(last, ast.Slice) and (last.lower is None or int_literal(last.lower) == 0)
            ):
                return False
            return self._additive_causal(e.value, depth + 1)
        if isinstance(e, ast.Attribute):
            value = self._buffer(e)
            return value is not None and self._additive_causal(value, depth + 1)
        if isinstance(e, ast.Call):
            callee = self.flow.callee(e)
            if callee is not None:
                rets = self.flow.returns_of(callee)
                return bool(rets) and all(self._additive_causal(r, depth + 1) for r in rets)
            name, receiver, args = self._tensor_call(e)
            inner = receiver if receiver is not None else (args[0] if args else None)
            return name == "log" and inner is not None and self.causal(inner)
        return False

    def _def_rows_keep_finite(self, d: Def, dim: int, depth: int) -> bool:
        if d.how in ("assign", "walrus") and d.value is not None:
            return self._rows_keep_finite(d.value, dim, depth)
        if d.how == "refine":
            return all(self._def_rows_keep_finite(p, dim, depth + 1) for p in self.flow.defs_reaching(d.node))
        node = d.node
        if d.how == "mutate" and isinstance(d.value, ast.Call) and not isinstance(node, ast.Subscript):
            return self._rows_keep_finite(d.value, dim, depth)  # scores.masked_fill_(~keep, -inf)
        if d.how == "mutate" and isinstance(node, ast.Subscript) and d.value is not None:
            # x[mask] = -inf: each row keeps what it had where the mask spares an entry
            base = node.value
            before = (
                self.flow.defs_reaching(base) if isinstance(base, ast.Name) and self.flow.is_use(base) else []
            )
            return (
                bool(before)
                and all(self._def_rows_keep_finite(p, dim, depth + 1) for p in before)
                and (self.may_hold_neg_inf(d.value) is None or self._spares_row(node.slice, dim, depth + 1))
            )
        return self.through_def(d, self.may_hold_neg_inf) is None

    def _tensor_call(self, call: ast.Call) -> tuple[str | None, ast.expr | None, list[ast.expr]]:
        """(short name, receiver, positional arguments) of a torch function or Tensor method call."""
        qn = self.resolver.qualified_name(call.func)
        if qn is not None:
            if not qn.startswith(_TENSOR_ROOTS):
                return None, None, []
            return qn.rsplit(".", 1)[-1], None, list(call.args)
        receiver = self.ranges.method_receiver(call)
        if receiver is None or not isinstance(call.func, ast.Attribute):  # a receiver means x.name(...)
            return None, None, []
        return call.func.attr, receiver, list(call.args)

    def _spares_row(self, mask: ast.AST, dim: int, depth: int) -> bool:
        """Every row of the boolean ``mask`` along ``dim`` has a False entry (a fill there leaves one)."""
        if depth > _DEPTH:
            return False
        if (
            dim == -1
            and isinstance(mask, ast.Compare)
            and len(mask.ops) == 1
            and isinstance(mask.ops[0], ast.Eq)
            and isinstance(mask.comparators[0], ast.Constant)
            and mask.comparators[0].value in (0, False)
            and self.causal(mask.left)
        ):
            return True  # tril == 0 is False on and below the diagonal: column 0 of every row
        if isinstance(mask, ast.UnaryOp) and isinstance(mask.op, (ast.Invert, ast.Not)):
            return self._has_true_per_row(mask.operand, dim, depth + 1)
        if (
            dim == -1
            and isinstance(mask, ast.Compare)
            and len(mask.ops) == 1
            and isinstance(mask.ops[0], ast.Lt)
            and self._kth_largest(mask.comparators[0], mask.left)
        ):
            return True  # x < (k-th largest of x): False at each row's maximum (top-k sampling)
        if isinstance(mask, ast.Call):
            name, receiver, args = self._tensor_call(mask)
            if name == "logical_not":
                inner = receiver if receiver is not None else (args[0] if args else None)
                return inner is not None and self._has_true_per_row(inner, dim, depth + 1)
        inner = self._same_rows(mask, dim)
        if inner is not None:
            return self._spares_row(inner, dim, depth + 1)
        if isinstance(mask, ast.Name) and self.flow.is_use(mask):
            defs = self.flow.defs_reaching(mask)
            return bool(defs) and all(
                d.how in ("assign", "walrus")
                and d.value is not None
                and self._spares_row(d.value, dim, depth + 1)
                for d in defs
            )
        return False

    def _kth_largest(self, t: ast.AST, x: ast.AST) -> bool:
        """``t`` is the last of ``topk(x, k)``'s values per row along the last dimension, kept as a
        column (``v[:, [-1]]``, ``v[..., -1, None]``, ``v[:, -1:]``, ``v[:, -1].unsqueeze(-1)``),
        with ``x`` the same name the comparison reads."""
        if isinstance(t, ast.Name):
            d = self._sole_def(t)
            if d is None or d.how != "assign" or d.value is None:
                return False
            t = d.value
        if isinstance(t, ast.Call) and isinstance(t.func, ast.Attribute) and t.func.attr == "unsqueeze":
            t = t.func.value
        if not isinstance(t, ast.Subscript) or not isinstance(x, ast.Name):
            return False
        elts = list(t.slice.elts) if isinstance(t.slice, ast.Tuple) else [t.slice]
        while len(elts) > 1 and isinstance(elts[-1], ast.Constant) and elts[-1].value is None:
            elts.pop()
        last = elts[-1]
        if isinstance(last, ast.List) and len(last.elts) == 1:
            last = last.elts[0]
        elif (
            isinstance(last, ast.Slice)
            and last.upper is None
            and last.step is None
            and last.lower is not None
        ):
            last = last.lower
        if int_literal(last) != -1:
            return False
        call = self._topk_values(t.value)
        if call is None or any(k.arg == "largest" or k.arg == "dim" for k in call.keywords):
            return False
        _, receiver, args = self._tensor_call(call)
        source = receiver if receiver is not None else (args[0] if args else None)
        return (
            isinstance(source, ast.Name)
            and source.id == x.id
            and len(args) <= (1 if receiver is not None else 2)
        )

    def _sole_def(self, name: ast.Name) -> Def | None:
        """The one definition reaching the read ``name``, or None (not a read, or several)."""
        defs = self.flow.defs_reaching(name) if self.flow.is_use(name) else []
        return defs[0] if len(defs) == 1 else None

    def _topk_values(self, v: ast.AST) -> ast.Call | None:
        """The ``topk`` call whose values ``v`` is: ``topk(...)[0]``, ``topk(...).values``, or a
        name bound to one (``v, _ = torch.topk(x, k)``)."""
        if isinstance(v, ast.Subscript) and int_literal(v.slice) == 0:
            v = v.value
        elif isinstance(v, ast.Attribute) and v.attr == "values":
            v = v.value
        elif isinstance(v, ast.Name):
            d = self._sole_def(v)
            if d is None:
                return None
            if d.how == "unpack" and d.path == (0,) and isinstance(d.value, ast.Call):
                v = d.value
            elif d.how == "assign" and d.value is not None:
                return self._topk_values(d.value) if not isinstance(d.value, ast.Name) else None
            else:
                return None
        if isinstance(v, ast.Call) and self._tensor_call(v)[0] == "topk":
            return v
        return None

    def _has_true_per_row(self, mask: ast.AST, dim: int, depth: int) -> bool:
        """Every row of the boolean ``mask`` along ``dim`` has a True entry."""
        if depth > _DEPTH:
            return False
        if dim == -1 and self.causal(mask):
            return True
        if isinstance(mask, ast.BinOp) and isinstance(mask.op, ast.BitOr):
            return self._or_keeps_row(mask.left, mask.right, dim, depth)
        if isinstance(mask, ast.Call):
            name, receiver, args = self._tensor_call(mask)
            pair = ([receiver] if receiver is not None else []) + args
            if name == "logical_or" and len(pair) == 2:
                return self._or_keeps_row(pair[0], pair[1], dim, depth)
        inner = self._same_rows(mask, dim)
        if inner is not None:
            return self._has_true_per_row(inner, dim, depth + 1)
        if isinstance(mask, ast.Name) and self.flow.is_use(mask):
            defs = self.flow.defs_reaching(mask)
            return bool(defs) and all(self._def_has_true_per_row(d, dim, depth + 1) for d in defs)
        return False

    def _def_has_true_per_row(self, d: Def, dim: int, depth: int) -> bool:
        if d.how in ("assign", "walrus") and d.value is not None:
            return self._has_true_per_row(d.value, dim, depth)
        if d.how == "refine":
            return all(self._def_has_true_per_row(p, dim, depth + 1) for p in self.flow.defs_reaching(d.node))
        # keep[..., 0] = True: one column along the last dimension set in every row
        node = d.node
        if (
            d.how == "mutate"
            and isinstance(node, ast.Subscript)
            and isinstance(d.value, ast.Constant)
            and d.value.value is True
            and isinstance(node.slice, ast.Tuple)
            and dim == -1
        ):
            elts = node.slice.elts
            return (
                len(elts) == 2
                and isinstance(elts[0], ast.Constant)
                and elts[0].value is Ellipsis
                and isinstance(elts[1], ast.Constant)
                and type(elts[1].value) is int
            )
        return False

    def _or_keeps_row(self, a: ast.AST, b: ast.AST, dim: int, depth: int) -> bool:
        """a | b has a True per row: either side does, or one side is True exactly on the rows
        where the other has none (``m | ~m.any(dim, keepdim=True)``)."""
        if self._has_true_per_row(a, dim, depth + 1) or self._has_true_per_row(b, dim, depth + 1):
            return True
        return self._covers_empty_rows(b, a, dim) or self._covers_empty_rows(a, b, dim)

    def _covers_empty_rows(self, s: ast.AST, m: ast.AST, dim: int) -> bool:
        """``s`` is ~m.any(dim, keepdim=True), m.any(dim, keepdim=True).logical_not(), or
        m.sum(dim, keepdim=True) == 0, with ``m`` a name (the same value read twice)."""
        if not isinstance(m, ast.Name):
            return False
        if isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.Invert):
            return self._row_reduction(s.operand, m, dim, ("any",))
        if (
            isinstance(s, ast.Call)
            and isinstance(s.func, ast.Attribute)
            and s.func.attr == "logical_not"
            and not s.args
        ):
            return self._row_reduction(s.func.value, m, dim, ("any",))
        if isinstance(s, ast.Compare) and len(s.ops) == 1 and isinstance(s.ops[0], ast.Eq):
            zero = s.comparators[0]
            return (
                isinstance(zero, ast.Constant)
                and zero.value == 0
                and self._row_reduction(s.left, m, dim, ("sum", "count_nonzero"))
            )
        return False

    def _row_reduction(self, r: ast.AST, m: ast.Name, dim: int, names: tuple[str, ...]) -> bool:
        """``r`` is m.<name>(dim, keepdim=True) or torch.<name>(m, dim, keepdim=True)."""
        if not isinstance(r, ast.Call):
            return False
        name, receiver, args = self._tensor_call(r)
        if name not in names:
            return False
        if receiver is None:
            receiver, args = (args[0], args[1:]) if args else (None, [])
        kw = {k.arg: k.value for k in r.keywords}
        d = kw.get("dim", args[0] if args else None)
        keep = kw.get("keepdim", args[1] if len(args) > 1 else None)
        return (
            isinstance(receiver, ast.Name)
            and receiver.id == m.id
            and int_literal(d) == dim
            and isinstance(keep, ast.Constant)
            and keep.value is True
        )

    def _same_rows(self, e: ast.AST, dim: int) -> ast.AST | None:
        """The tensor whose rows along ``dim`` (negative) are ``e``'s rows, unchanged or
        broadcast: conversions, expand, unsqueeze before ``dim``, indexing that ends in
        full slices (``m[:, None, None, :]``). None when ``e`` is none of those."""
        if isinstance(e, ast.Subscript):
            elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            simple = all(
                isinstance(x, ast.Constant)
                and x.value in (None, Ellipsis)
                or _full_slice(x)
                or int_literal(x) is not None
                for x in elts
            )
            tail = elts[len(elts) + dim :] if len(elts) >= -dim else []
            if simple and (
                tail
                and all(_full_slice(x) for x in tail)
                or (isinstance(elts[-1], ast.Constant) and elts[-1].value is Ellipsis)
            ):
                return e.value
            return None
        if not isinstance(e, ast.Call):
            return None
        name, receiver, args = self._tensor_call(e)
        if receiver is None:
            return None
        if name in _SAME_ROWS:
            return receiver
        at = int_literal(args[0]) if name == "unsqueeze" and len(args) == 1 else None
        if at is not None and (at == 0 or at < dim):  # a new dimension in front of the rows
            return receiver
        return None

    # --- indices -----------------------------------------------------------------

    def _select(self, s: ast.AST) -> str | None:
        if isinstance(s, ast.Slice):
            for bound in (s.lower, s.upper):
                if bound is not None and self.ranges.fact(bound).is_point is False:
                    return f"slicing with computed bounds: [{_words(s)}]"
            return None
        if isinstance(s, ast.Tuple):
            if any(self._positions(e) for e in s.elts):
                # Index arrays broadcast together: beside n positions (torch.arange(n)) another
                # array selects n elements or fails, whatever it holds. Only a slice (its own
                # dimension) can still select nothing: probs[torch.arange(n), target].
                return self.first_of((e for e in s.elts if isinstance(e, ast.Slice)), self.may_select_nothing)
            return self.first_of(s.elts, self.may_select_nothing)
        if isinstance(s, ast.Constant) or self.ranges.fact(s).pytype in ("num", "str", "none"):
            return None  # x[0], x[i] with i a number, x[None]
        if (
            isinstance(s, (ast.Compare, ast.BoolOp))
            or (isinstance(s, ast.UnaryOp) and isinstance(s.op, (ast.Not, ast.Invert)))
            or (isinstance(s, ast.BinOp) and isinstance(s.op, _MASK_OPERATORS))
        ):
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
            returned = self.flow.returned(s)
            if returned is not None:
                return self.first_of(returned, self.may_select_nothing)
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
                    got = self.through_def(d, self.may_select_nothing)
                    if got is not None:
                        return (
                            got if got != "unknown" else f"indexing with {_words(s)} (maybe a boolean mask)"
                        )
                return None
            if self.resolver.qualified_name(s) is None:
                return f"indexing with {_words(s)} (maybe a boolean mask)"  # batch.mask
        return None

    def _positions(self, e: ast.AST) -> bool:
        """``e`` is an array of positions counted out by ``arange`` or ``range``."""
        if not isinstance(e, ast.Call):
            return False
        qn = self.resolver.qualified_name(e.func)
        return qn is not None and qn.rsplit(".", 1)[-1] in ("arange", "range")

    def _mask_call(self, call: ast.Call) -> bool:
        qn = self.resolver.qualified_name(call.func)
        if qn is not None:
            return qn.startswith(_TENSOR_ROOTS) and qn.rsplit(".", 1)[-1] in MASK_PRODUCERS
        return (
            isinstance(call.func, ast.Attribute)
            and self.ranges.method_receiver(call) is not None
            and call.func.attr in MASK_PRODUCERS
        )


# Tensor methods that keep every row of their receiver (conversions, copies, broadcasts).
_SAME_ROWS = frozenset(
    ("float", "bool", "to", "detach", "contiguous", "expand", "expand_as", "type_as", "half", "double")
    + ("int", "long", "byte")
)


def _full_slice(e: ast.AST) -> bool:
    return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None


def _softmax_dim(call: ast.Call, method: bool) -> int | None:
    """The literal ``dim`` of a softmax call (method: first argument; function: second)."""
    for k in call.keywords:
        if k.arg == "dim":
            return int_literal(k.value)
    pos = 0 if method else 1
    return int_literal(call.args[pos]) if len(call.args) > pos else None
