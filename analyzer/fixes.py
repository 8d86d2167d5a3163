"""Propose idiomatic rewrites for an unsafe-op site (unverified; dynamic/verify.py re-checks them).

``propose_fixes(text, verdict)`` finds the site's expression in ``text`` with libcst, rewrites
it the way a person would (``log(softmax(x))`` -> ``log_softmax(x)``, ``log(x)`` ->
``log(x.clamp_min(eps))``, a sign-preserving guard for divisors ...) and returns ``Fix``es whose
edits replace the site's span (plus an import line when a new name is needed). The code's own
style is kept: the namespace it used (``F.`` / ``torch.`` / ``th.``), function versus method
form, in-place forms, and the ``unbiased=`` versus ``correction=`` keyword. ``eps`` follows the
operand's dtype (``catalogue.DTYPES``; float32 unless the witness says otherwise).

Nothing here runs user code or imports torch: it is cheap enough for the editor's quick fixes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource

from grist_lsp.analyzer.analysis import file_dtype
from grist_lsp.analyzer.catalogue import KINDS, OP_TABLE, DtypeLimits, dtype_limits
from grist_lsp.analyzer.where_branch import SAFE_FILL, guard_at
from grist_lsp.model import Fix, Span, TextEdit, Verdict

# Mantissa bits per dtype: clamps next to +-1 (acos, atanh, log1p, logit) need an eps that
# survives ``1 - eps`` in the operand's dtype, which the catalogue's absolute eps (1e-8 for
# float32) does not: 1 - 1e-8 rounds back to 1.0 in float32 and atanh(1.0) is inf.
_MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}

_FUNCTIONAL = "torch.nn.functional"
_SOFTMAX_NAMES = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
_SIGMOID_NAMES = {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}
_EXP_NAMES = {"torch.exp"}
_SUM_NAMES = {"torch.sum"}
# Producers whose value is >= 0: a divisor built from them only needs clamp_min, not a
# sign-preserving guard. Matched on the function's last name so methods count too.
_NONNEG_PRODUCERS = {
    "abs",
    "exp",
    "exp2",
    "sqrt",
    "softmax",
    "sigmoid",
    "relu",
    "relu6",
    "softplus",
    "norm",
    "vector_norm",
    "matrix_norm",
    "square",
    "numel",
    "count_nonzero",
    "cosh",
    "len",
    "absolute",
}
# Reductions and casts that keep a non-negative operand non-negative.
_NONNEG_PRESERVING = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "float",
    "double",
    "half",
    "to",
    "detach",
    "clone",
    "contiguous",
    "squeeze",
    "unsqueeze",
    "view",
    "reshape",
    "flatten",
    "type_as",
    "expand_as",
    "prod",
    "cumsum",
}


# --- public API ----------------------------------------------------------------


def propose_fixes(text: str, verdict: Verdict) -> list[Fix]:
    """Candidate rewrites for ``verdict``'s site in ``text``, best first; [] when none applies.

    The fixes are *unverified* (``verified=False``): dynamic/verify.py applies each one and
    re-runs the static pass and the engine before marking it verified.
    """
    site = verdict.site
    if site.kind not in KINDS:
        return []
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return []
    index = _Index.build(module)
    node = index.find(site.span)
    if node is None:
        return []
    if verdict.witness is not None and verdict.witness.operand is not None:
        dtype = verdict.witness.operand.dtype
    else:  # no witness: the precision the static pass assumed for the file (float16 if it says so)
        dtype = file_dtype(text)
    ctx = _Context(
        module=module,
        text=text,
        index=index,
        limits=dtype_limits(dtype),
        op=site.op,
        kind=site.kind,
        node=node,
        span=site.span,
        integer_operand=_is_integer_dtype(dtype),
        operand_nonnegative=verdict.operand_range is not None and verdict.operand_range.nonnegative,
    )
    builder = _BUILDERS.get(site.kind)
    if builder is None:
        return []
    # A where-branch site keeps its values: only the discarded branch changes (double where).
    proposals = _double_where(ctx) if site.discarded_by is not None else []
    fixes: list[Fix] = []
    for proposal in proposals + builder(ctx):
        fix = ctx.to_fix(proposal)
        if fix is not None and all(fix.edits != f.edits for f in fixes):
            fixes.append(fix)
    return fixes


def eps_for(dtype: str | None) -> float:
    """The absolute eps our clamp floors use for ``dtype`` (the catalogue's, float32 default)."""
    return dtype_limits(dtype).eps


def eps_near_one(dtype: str | None) -> float:
    """An eps that still moves a value off +-1 in ``dtype``: machine epsilon rounded up to 10^k."""
    limits = dtype_limits(dtype)
    machine = 2.0 ** -_MANTISSA_BITS.get(limits.name, 23)
    return max(limits.eps, 10.0 ** math.ceil(math.log10(machine)))


# --- locating the site -----------------------------------------------------------


@dataclass
class _Index(cst.CSTVisitor):
    """Positions, parents and resolved call names of one parsed module."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    spans: dict[cst.CSTNode, Span] = field(default_factory=dict)
    parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    names: dict[cst.CSTNode, set[str]] = field(default_factory=dict)
    module: cst.Module | None = None
    stack: list[cst.CSTNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        cst.CSTVisitor.__init__(self)

    @staticmethod
    def build(module: cst.Module) -> _Index:
        wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
        index = _Index(module=module)
        wrapper.visit(index)
        return index

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.parents[node] = self.stack[-1]
        self.stack.append(node)
        if isinstance(
            node,
            (
                cst.Call,
                cst.BinaryOperation,
                cst.AugAssign,
                cst.UnaryOperation,
                cst.Attribute,
                cst.Name,
                cst.Subscript,
            ),
        ) or isinstance(self.parents.get(node), cst.Module):
            r = self.get_metadata(PositionProvider, node, None)
            if r is not None:
                self.spans[node] = Span(r.start.line, r.start.column, r.end.line, r.end.column)
        if isinstance(node, (cst.Name, cst.Attribute)):
            qnames = self.get_metadata(QualifiedNameProvider, node, set())
            self.names[node] = {
                q.name
                for q in qnames
                if q.source in (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN)
            }
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def find(self, span: Span) -> cst.CSTNode | None:
        """The expression (or augmented assignment) whose span is exactly ``span``.

        When several nodes share a span (a Call and a node it wraps never do, but a
        parenthesised expression and its content may) the outermost wins.
        """
        preferred = (cst.Call, cst.BinaryOperation, cst.AugAssign)
        exact = [n for n, s in self.spans.items() if s == span]
        for n in exact:
            if isinstance(n, preferred):
                return n
        if exact:
            return exact[0]
        # Spans from an older parse can differ by the parentheses: take the smallest
        # preferred node that starts where the site starts.
        starting = [
            n
            for n, s in self.spans.items()
            if isinstance(n, preferred) and (s.start_line, s.start_col) == (span.start_line, span.start_col)
        ]
        if not starting:
            return None
        return min(starting, key=lambda n: (self.spans[n].end_line, self.spans[n].end_col))

    def callee(self, call: cst.CSTNode) -> tuple[str, str] | None:
        """("function", qualified name) or ("method", attribute name) for a call; None otherwise."""
        if not isinstance(call, cst.Call):
            return None
        func = call.func
        if isinstance(func, cst.Attribute) and not (
            isinstance(func.value, (cst.Name, cst.Attribute)) and self.names.get(func.value)
        ):
            # `th.exp(x).sum` resolves to "torch.exp.sum" but is a method of a tensor: only a
            # chain of imported names is a module function
            return ("method", func.attr.value)
        names = self.names.get(func, set())
        for name in sorted(names):
            if "." in name or name in ("max", "min", "len", "abs"):
                return ("function", name)
        if isinstance(call.func, cst.Attribute):
            return ("method", call.func.attr.value)
        return None

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The nearest enclosing node that is not a wrapper (Arg)."""
        p = self.parents.get(node)
        while isinstance(p, cst.Arg):
            p = self.parents.get(p)
        return p


# --- proposals -------------------------------------------------------------------


@dataclass
class _Proposal:
    """One rewrite before it becomes a Fix: which node is replaced, by what, and imports needed."""

    title: str
    target: cst.CSTNode
    replacement: cst.CSTNode  # an expression mostly; an argument or a statement for some kinds
    imports: list[str] = field(default_factory=list)


@dataclass
class _Context:
    module: cst.Module
    text: str
    index: _Index
    limits: DtypeLimits
    op: str
    kind: str
    node: cst.CSTNode
    span: Span
    integer_operand: bool = False
    operand_nonnegative: bool = False  # the static pass's range for the operand starts at >= 0

    # -- namespaces ---------------------------------------------------------------
    def module_alias(self, qualified: str) -> str | None:
        """The local name a top-level import binds to module ``qualified`` (``F``, ``th``)."""
        for stmt in self.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        dotted = _dotted(alias.name)
                        if alias.asname is not None and dotted == qualified:
                            return _dotted(alias.asname.name)
                        if alias.asname is None and (
                            dotted == qualified or dotted.startswith(qualified + ".")
                        ):
                            # `import torch.nn.functional` binds `torch`: the full path works
                            return qualified
                elif isinstance(small, cst.ImportFrom) and small.module is not None:
                    if isinstance(small.names, cst.ImportStar):
                        continue
                    base = "." * len(small.relative) + _dotted(small.module)
                    for alias in small.names:
                        if f"{base}.{_dotted(alias.name)}" == qualified:
                            return _dotted(alias.asname.name) if alias.asname else _dotted(alias.name)
        return None

    def functional(self) -> tuple[str, list[str]]:
        """How to spell torch.nn.functional here, and the import line to add if any."""
        alias = self.module_alias(_FUNCTIONAL)
        if alias is not None:
            return alias, []
        if "F" in _top_level_names(self.module):
            torch_alias = self.module_alias("torch")
            if torch_alias is not None:
                return f"{torch_alias}.nn.functional", []
            return "nnf", ["import torch.nn.functional as nnf"]
        return "F", ["import torch.nn.functional as F"]

    def torch_namespace(self) -> str | None:
        return self.module_alias("torch")

    # -- numbers --------------------------------------------------------------------
    @property
    def eps(self) -> float:
        return 1.0 if self.integer_operand else self.limits.eps

    @property
    def eps_text(self) -> str:
        """eps as code: ``1`` for integer tensors (a float literal would promote them to float)."""
        return "1" if self.integer_operand else _num(self.eps)

    @property
    def eps1(self) -> float:
        return eps_near_one(self.limits.name)

    def dtype_note(self) -> str:
        return f" ({self.limits.name})" if self.limits.name != "float32" else ""

    # -- output ---------------------------------------------------------------------
    def to_fix(self, proposal: _Proposal) -> Fix | None:
        span = self.index.spans.get(proposal.target)
        if span is None:
            return None
        replacement = proposal.replacement
        if isinstance(replacement, cst.BaseExpression):
            # The span excludes the target's own parentheses, so the new code must too;
            # a replacement that binds looser than the target gets its own.
            replacement = replacement.with_changes(lpar=[], rpar=[])
            if _needs_parens(proposal.target, replacement, self.index.parent(proposal.target)):
                replacement = _paren(replacement)
        new_code = _reindent(self.module.code_for_node(replacement), self.text, span)
        edits = [TextEdit(span=span, new_text=new_code)]
        for line in proposal.imports:
            edits.insert(
                0, TextEdit(span=_import_position(self.index, self.module, self.text), new_text=line + "\n")
            )
        return Fix(title=proposal.title, edits=edits)


def _reindent(code: str, text: str, span: Span) -> str:
    """Continuation lines of generated code, indented like the block the site sits in.

    ``code_for_node`` renders a node outside its statement, so the lines after the first lose
    the enclosing block's indentation; the site's first source line carries it.
    """
    if "\n" not in code:
        return code
    lines = text.splitlines()
    first = lines[span.start_line - 1] if span.start_line - 1 < len(lines) else ""
    indent = first[: len(first) - len(first.lstrip())]
    head, *rest = code.split("\n")
    return "\n".join([head] + [indent + line if line.strip() else line for line in rest])


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _top_level_names(module: cst.Module) -> set[str]:
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(
                    small.names, cst.ImportStar
                ):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        names.add(_dotted(bound).split(".")[0])
                elif isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            names.add(target.target.value)
    return names


def _import_position(index: _Index, module: cst.Module, text: str) -> Span:
    """Where a new import line goes: after the last top-level import of the leading block.

    With no imports, after the module docstring; with neither, after the header comments
    (a shebang or licence must stay first).
    """
    last_import = None
    docstring_end = None
    for i, stmt in enumerate(module.body):
        span = index.spans.get(stmt)
        if span is None:
            break
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            last_import = span.end_line
        elif (
            i == 0
            and isinstance(stmt, cst.SimpleStatementLine)
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            docstring_end = span.end_line
        elif last_import is not None or not isinstance(stmt, (cst.If, cst.Try)):
            # the leading import block ends at the first other statement (imports guarded by
            # `try:`/`if TYPE_CHECKING:` before any import are skipped over)
            break
    if last_import is not None or docstring_end is not None:
        line = (last_import or docstring_end or 0) + 1
    else:
        line = 1 + sum(1 for el in module.header if el.comment is not None or el.indent)
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    line = min(line, n_lines + 1)
    return Span(line, 0, line, 0)


# --- small builders ------------------------------------------------------------


def _num(value: float) -> str:
    """A float literal people write: 1e-8, 88.7, 1.0."""
    if float(value).is_integer() and abs(value) < 1e6:
        return f"{value:.1f}"
    exponent = round(math.log10(abs(value)))
    if exponent <= -3 and abs(abs(value) - 10.0**exponent) <= 1e-9 * abs(value):
        return f"{'-' if value < 0 else ''}1e{exponent}"  # 1e-4, not 0.0001
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        return f"{mantissa}e{int(exponent)}"
    return text


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` ready to take ``.method(...)``: parenthesised unless it already binds tightly."""
    if node.lpar or isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return node
    return _paren(node)


def _paren(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _method(node: cst.BaseExpression, name: str, *args: str | cst.BaseExpression, **kwargs: str) -> cst.Call:
    call_args = [cst.Arg(_expr(a) if isinstance(a, str) else a) for a in args]
    call_args += [
        cst.Arg(
            _expr(v),
            keyword=cst.Name(k),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
        for k, v in kwargs.items()
    ]
    return cst.Call(func=cst.Attribute(value=_atom(node), attr=cst.Name(name)), args=_commas(call_args))


def _call(func: str, *args: str | cst.BaseExpression) -> cst.Call:
    call_args = [cst.Arg(_expr(a) if isinstance(a, str) else a) for a in args]
    return cst.Call(func=_expr(func), args=_commas(call_args))


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    return [
        a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if i < len(args) - 1
        else a
        for i, a in enumerate(args)
    ]


def _strip(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


_TIGHT = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.Integer, cst.Float)


def _needs_parens(target: cst.CSTNode, replacement: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """A replacement that binds looser than what it replaces needs parentheses, unless the
    parent is a place where any expression fits (an argument, an assignment, a return)."""
    if isinstance(replacement, _TIGHT) or not isinstance(target, _TIGHT):
        return False
    loose_ok = (
        cst.Assign,
        cst.AnnAssign,
        cst.Return,
        cst.Expr,
        cst.Call,
        cst.Element,
        cst.DictElement,
        cst.AugAssign,
        cst.Index,
        cst.SubscriptElement,
    )
    return not isinstance(parent, loose_ok)


# --- operand plumbing ----------------------------------------------------------------


@dataclass
class _Operand:
    """Where the dangerous operand sits in the site's node and how to put a new one there."""

    node: cst.BaseExpression
    form: str  # "function", "method", "inplace", "binary", "augassign", "math", "numpy"
    namespace: str = ""  # the module expression of a function call (``torch``, ``np``, ``math``)


def _operand(ctx: _Context, node: cst.CSTNode | None = None, op_name: str | None = None) -> _Operand | None:
    """The dangerous operand of the site (or of ``node``), following the catalogue's row."""
    node = node if node is not None else ctx.node
    op_name = op_name if op_name is not None else ctx.op
    if isinstance(node, cst.BinaryOperation):
        # ``a / b`` and the reflected ``2 / b``: the divisor is the right operand; for ``a ** p``
        # the base is the left one, for the reflected ``2 ** x`` the exponent is the right one.
        right = ctx.kind == "div" or op_name.endswith("__rpow__")
        return _Operand(node.right if right else node.left, "binary")
    if isinstance(node, cst.AugAssign):
        return _Operand(node.value if ctx.kind == "div" else node.target, "augassign")
    if not isinstance(node, cst.Call):
        return None
    # The call's own spelling decides method versus function (`torch.logit(x)` vs `x.logit()`);
    # the site's op name is only a fallback for the catalogue row.
    method = _is_method_call(ctx, node)
    spelled = _spelled_name(ctx, node)
    row = OP_TABLE.get(spelled) or OP_TABLE.get(op_name)
    index = row.operand_index if row else 0
    keyword = row.operand_keyword if row else "input"
    if method:
        if not isinstance(node.func, cst.Attribute):
            return None
        name = node.func.attr.value
        form = "inplace" if name.endswith("_") and not name.endswith("__") else "method"
        if row is not None and not row.name.startswith("torch.Tensor."):
            index += 1  # a function row counts the tensor as argument 0 as well
        if index == 0:
            return _Operand(node.func.value, form)
        arg = _arg(node, index - 1, keyword)
        return None if arg is None else _Operand(arg.value, form)
    namespace = _dotted(node.func.value) if isinstance(node.func, cst.Attribute) else ""
    form = "math" if spelled.startswith("math.") else "numpy" if spelled.startswith("numpy.") else "function"
    arg = _arg(node, index, keyword)
    return None if arg is None else _Operand(arg.value, form, namespace)


def _is_method_call(ctx: _Context, node: cst.CSTNode) -> bool:
    callee = ctx.index.callee(node)
    return callee is not None and callee[0] == "method"


def _spelled_name(ctx: _Context, node: cst.Call) -> str:
    """``torch.log`` / ``torch.Tensor.log_`` / ``math.log``: the catalogue name of the call as written."""
    callee = ctx.index.callee(node)
    if callee is None:
        return ""
    kind, name = callee
    return f"torch.Tensor.{name}" if kind == "method" else name


def _arg(call: cst.Call, index: int, keyword: str | None) -> cst.Arg | None:
    if keyword:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index] if index < len(positional) else None


def _replace(
    ctx: _Context, old: cst.CSTNode, new: cst.CSTNode, within: cst.CSTNode | None = None
) -> cst.CSTNode:
    """``within`` (the site's node by default) with the child ``old`` swapped for ``new``."""
    within = within if within is not None else ctx.node
    return within.deep_replace(old, new)


def _guard_operand(
    ctx: _Context,
    operand: _Operand,
    lo: float | None,
    hi: float | None,
    lo_text: str | None = None,
    hi_text: str | None = None,
) -> cst.CSTNode | None:
    """The site's node with its operand clamped to [lo, hi], in the form the code used.

    Tensor methods chain the clamp before the op (``x.clamp_min(eps).log()``, in place for
    in-place ops so the tensor is still modified where the code expects it); functions wrap the
    argument; ``math.*`` gets ``max``/``min`` and ``numpy.*`` gets ``np.maximum``/``np.clip``.
    """
    lo_s = lo_text if lo_text is not None else (None if lo is None else _num(lo))
    hi_s = hi_text if hi_text is not None else (None if hi is None else _num(hi))
    x = operand.node
    if operand.form == "math":
        inner: cst.BaseExpression = _strip(x)
        if lo_s is not None:
            inner = _call("max", inner, lo_s)
        if hi_s is not None:
            inner = _call("min", inner, hi_s)
        guarded = inner
    elif operand.form == "numpy":
        ns = operand.namespace or "np"
        if lo_s is not None and hi_s is not None:
            guarded = _call(f"{ns}.clip", _strip(x), lo_s, hi_s)
        elif lo_s is not None:
            guarded = _call(f"{ns}.maximum", _strip(x), lo_s)
        elif hi_s is not None:
            guarded = _call(f"{ns}.minimum", _strip(x), hi_s)
        else:
            return None  # no bound: nothing to guard
    else:
        suffix = (
            "_" if operand.form == "inplace" or (operand.form == "augassign" and ctx.kind != "div") else ""
        )
        if lo_s is not None and hi_s is not None:
            guarded = _method(x, "clamp" + suffix, lo_s, hi_s)
        elif lo_s is not None:
            guarded = _method(x, "clamp_min" + suffix, lo_s)
        elif hi_s is not None:
            guarded = _method(x, "clamp_max" + suffix, hi_s)
        else:
            return None
    if operand.form == "augassign" and ctx.kind != "div":
        # ``x **= p`` becomes ``x.clamp_min_(eps).pow_(p)``: the same in-place update of x.
        assert isinstance(ctx.node, cst.AugAssign)
        name = {"PowerAssign": "pow_"}.get(type(ctx.node.operator).__name__)
        if name is None:
            return None
        return cst.Expr(_method(guarded, name, ctx.node.value))
    return _replace(ctx, x, guarded)


def _sign_preserving_guard(ctx: _Context, x: cst.BaseExpression) -> cst.BaseExpression:
    """A divisor kept at least eps away from zero without flipping its sign.

    ``b.clamp_min(eps)`` would turn every negative divisor into +eps and ``b + eps`` only
    moves zero when b >= 0, so for a divisor of unknown sign we push values in (-eps, eps)
    out to +-eps on their own side (zero goes to +eps). With a torch module alias and a simple
    operand the readable ``torch.where`` form is used; otherwise ``abs().clamp_min().copysign()``,
    which evaluates the operand once (the operand may be an expensive or side-effecting call).
    """
    eps = ctx.eps_text
    torch_ns = ctx.torch_namespace()
    bare = _strip(x)
    if torch_ns is not None and isinstance(bare, (cst.Name, cst.Attribute)):
        return _call(
            f"{torch_ns}.where",
            _expr(f"{ctx.module.code_for_node(bare)} < 0"),
            _method(bare, "clamp_max", f"-{eps}"),
            _method(bare, "clamp_min", eps),
        )
    return _method(_method(_method(x, "abs"), "clamp_min", eps), "copysign", bare)


def _nonnegative(ctx: _Context, node: cst.BaseExpression) -> bool:
    """A syntactic proof that ``node`` is >= 0 (abs, exp, norm, squares, sums of those ...)."""
    node = _strip(node)
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.BinaryOperation):
        op = type(node.operator).__name__
        if op == "Power" and isinstance(node.right, cst.Integer) and int(node.right.value) % 2 == 0:
            return True
        if op in ("Add", "Multiply", "Divide"):
            if op == "Multiply" and ctx.module.code_for_node(_strip(node.left)) == ctx.module.code_for_node(
                _strip(node.right)
            ):
                return True
            return _nonnegative(ctx, node.left) and _nonnegative(ctx, node.right)
        return False
    callee = ctx.index.callee(node)
    if callee is None or not isinstance(node, cst.Call):
        return False
    kind, name = callee
    last = name.rsplit(".", 1)[-1]
    if last in _NONNEG_PRODUCERS:
        return True
    if last in ("clamp", "clamp_min", "clip"):
        bound = _arg(node, 0 if kind == "method" else 1, "min")
        return bound is not None and _nonnegative_literal(bound.value)
    if last in _NONNEG_PRESERVING:
        if kind == "method" and isinstance(node.func, cst.Attribute):
            return _nonnegative(ctx, node.func.value)
        first = _arg(node, 0, "input")
        return first is not None and _nonnegative(ctx, first.value)
    return False


def _nonnegative_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) >= 0


def _is_integer_dtype(dtype: str | None) -> bool:
    return dtype is not None and any(t in dtype for t in ("int", "bool", "long", "short", "uint"))


def _op_label(ctx: _Context) -> str:
    if isinstance(ctx.node, cst.BinaryOperation):
        return {"Divide": "/", "FloorDivide": "//", "Modulo": "%", "Power": "**"}.get(
            type(ctx.node.operator).__name__, ctx.op
        )
    if isinstance(ctx.node, cst.AugAssign):
        return {
            "DivideAssign": "/=",
            "FloorDivideAssign": "//=",
            "ModuloAssign": "%=",
            "PowerAssign": "**=",
        }.get(type(ctx.node.operator).__name__, ctx.op)
    if isinstance(ctx.node, cst.Call):
        spelled = _spelled_name(ctx, ctx.node)
        if spelled:
            return spelled.replace("torch.Tensor.", "Tensor.", 1)
    return ctx.op.replace("torch.Tensor.", "Tensor.", 1)


# --- per-kind builders ---------------------------------------------------------------


def _clamp_fix(
    ctx: _Context,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_text: str | None = None,
    hi_text: str | None = None,
    words: str,
) -> list[_Proposal]:
    operand = _operand(ctx)
    if operand is None:
        return []
    new = _guard_operand(ctx, operand, lo, hi, lo_text, hi_text)
    if new is None:
        return []
    return [_Proposal(f"Clamp the operand of {_op_label(ctx)} {words}{ctx.dtype_note()}", ctx.node, new)]


def _double_where(ctx: _Context) -> list[_Proposal]:
    """``torch.where(c, torch.log(x), 0)`` -> ``torch.where(c, torch.log(torch.where(c, x, 1)), 0)``.

    The op's value is discarded where ``c`` is False, but its gradient still flows there
    (0 * inf = NaN at ``x == 0``). Giving the op a safe operand in that branch first (1 for log)
    leaves every kept value as it was and makes the discarded branch's derivative finite.
    """
    guard = guard_at(ctx.text, ctx.span)
    fill = SAFE_FILL.get(ctx.kind)
    if guard is None or guard.condition is None or fill is None or ctx.integer_operand:
        return []
    operand = _operand(ctx)
    if operand is None or operand.form not in ("function", "method", "binary"):
        return []
    namespace = ctx.torch_namespace()
    imports = [] if namespace is not None else ["import torch"]
    where = f"{namespace or 'torch'}.where"
    x = _strip(operand.node)
    branches = (x, fill) if guard.kept_when else (fill, x)
    safe = _call(where, _expr(guard.condition), *branches)
    title = (
        f"Give {_op_label(ctx)} a safe operand ({fill}) where {guard.words} discards its value "
        f"(double where: {where}({guard.condition}, ...) on the operand too)"
    )
    new = _replace(ctx, operand.node, safe)
    if not isinstance(new, cst.BaseExpression):
        return []
    return [_Proposal(title, ctx.node, new, imports)]


def _log_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = _log_patterns(ctx)
    proposals += _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)}")
    return proposals


def _log_patterns(ctx: _Context) -> list[_Proposal]:
    """log(softmax) -> log_softmax, log(sigmoid) -> logsigmoid, log(sum(exp)) -> logsumexp."""
    if ctx.op not in ("torch.log", "torch.Tensor.log") or not isinstance(ctx.node, cst.Call):
        return []
    operand = _operand(ctx)
    if operand is None:
        return []
    if operand.form == "function" and len(ctx.node.args) != 1:
        return []  # `out=` and friends: a pattern rewrite would drop them
    if operand.form == "method" and ctx.node.args:
        return []
    inner = _strip(operand.node)
    if isinstance(inner, cst.Name):
        # `probs = softmax(z)` ... `log(probs)`: the same rewrite, through the variable
        inner = _single_assignment(ctx, inner) or inner
    negate = False
    left = _strip(inner.left) if isinstance(inner, cst.BinaryOperation) else None
    if (
        isinstance(inner, cst.BinaryOperation)
        and isinstance(inner.operator, cst.Subtract)
        and isinstance(left, (cst.Integer, cst.Float))
        and float(left.value) == 1.0
    ):
        # log(1 - sigmoid(x)) == logsigmoid(-x)
        inner, negate = _strip(inner.right), True
    callee = ctx.index.callee(inner)
    if callee is None or not isinstance(inner, cst.Call):
        return []
    kind, name = callee
    if negate and not (
        (kind == "function" and name in _SIGMOID_NAMES) or (kind == "method" and name == "sigmoid")
    ):
        return []
    if (kind == "function" and name in _SOFTMAX_NAMES) or (kind == "method" and name == "softmax"):
        assert isinstance(inner.func, (cst.Attribute, cst.Name))
        if isinstance(inner.func, cst.Attribute):
            func = inner.func.with_changes(attr=cst.Name("log_softmax"))
        else:  # a bare `softmax` imported by name: spell log_softmax from its module
            module = name.rsplit(".", 1)[0]
            alias = ctx.module_alias(module)
            func = _expr(f"{alias}.log_softmax") if alias else cst.Name("log_softmax")
            if alias is None:
                return [
                    _Proposal(
                        "Use log_softmax",
                        ctx.node,
                        inner.with_changes(func=func),
                        [f"from {module} import log_softmax"],
                    )
                ]
        return [_Proposal("Use log_softmax", ctx.node, inner.with_changes(func=func, lpar=[], rpar=[]))]
    if (kind == "function" and name in _SIGMOID_NAMES) or (kind == "method" and name == "sigmoid"):
        if kind == "method":
            assert isinstance(inner.func, cst.Attribute)
            if inner.args:
                return []
            x = _strip(inner.func.value)
        else:
            arg = _arg(inner, 0, "input")
            if arg is None or len(inner.args) != 1:
                return []
            x = arg.value
        ns, imports = ctx.functional()
        if negate:
            x = cst.UnaryOperation(operator=cst.Minus(), expression=_atom(_strip(x)))
        return [
            _Proposal(
                "Use F.logsigmoid" if ns == "F" else f"Use {ns}.logsigmoid",
                ctx.node,
                _call(f"{ns}.logsigmoid", x),
                imports,
            )
        ]
    lse = _logsumexp_of(ctx, inner)
    if lse is not None:
        return [_Proposal("Use logsumexp", ctx.node, lse)]
    return []


class _Bindings(cst.CSTVisitor):
    """Every place a function binds each name (parameters, assignments, loop targets ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.count: dict[str, int] = {}
        self.values: dict[str, cst.BaseExpression] = {}

    def _bind(self, target: cst.CSTNode, value: cst.BaseExpression | None = None) -> None:
        if isinstance(target, cst.Name):
            self.count[target.value] = self.count.get(target.value, 0) + 1
            if value is not None:
                self.values[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value if len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target)


def _single_assignment(ctx: _Context, name: cst.Name) -> cst.BaseExpression | None:
    """The value of ``name`` when the enclosing function assigns it exactly once, from a call
    whose name arguments are themselves never rebound (so the call can move to the use)."""
    function = ctx.node
    while function is not None and not isinstance(function, cst.FunctionDef):
        function = ctx.index.parents.get(function)
    if function is None:
        return None
    bindings = _Bindings()
    function.visit(bindings)
    value = bindings.values.get(name.value)
    if bindings.count.get(name.value) != 1 or not isinstance(value, cst.Call):
        return None
    used = {n.value for n in _names_in(value)}
    if any(bindings.count.get(n, 0) > 1 for n in used):
        return None
    return value


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    node.visit(Collect())
    return found


def _logsumexp_of(ctx: _Context, total: cst.BaseExpression) -> cst.BaseExpression | None:
    """``logsumexp(x, dim)`` for ``sum(exp(x), dim)`` in any of its spellings, else None."""
    total = _strip(total)
    callee = ctx.index.callee(total)
    if callee is None or not isinstance(total, cst.Call):
        return None
    kind, name = callee
    if kind == "method" and name == "sum" and isinstance(total.func, cst.Attribute):
        summed, rest = _strip(total.func.value), list(total.args)
    elif kind == "function" and name in _SUM_NAMES and total.args:
        summed, rest = _strip(total.args[0].value), list(total.args[1:])
    else:
        return None
    inner = ctx.index.callee(summed)
    if inner is None or not isinstance(summed, cst.Call):
        return None
    ikind, iname = inner
    if ikind == "method" and iname == "exp" and isinstance(summed.func, cst.Attribute) and not summed.args:
        x = summed.func.value
        dims = [a for a in rest if a.keyword is None or a.keyword.value in ("dim", "keepdim")]
        if len(dims) != len(rest):
            return None
        if not dims:
            return _method(_method(x, "flatten"), "logsumexp", "0")
        return cst.Call(func=cst.Attribute(value=_atom(x), attr=cst.Name("logsumexp")), args=dims)
    if (
        ikind == "function"
        and iname in _EXP_NAMES
        and len(summed.args) == 1
        and isinstance(summed.func, cst.Attribute)
    ):
        x = summed.args[0].value
        ns = _dotted(summed.func.value)
        if not rest:
            return _call(f"{ns}.logsumexp", _method(x, "flatten"), "0")
        if any(a.keyword is not None and a.keyword.value not in ("dim", "keepdim") for a in rest):
            return None
        args = [cst.Arg(x)] + [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest]
        return cst.Call(func=_expr(f"{ns}.logsumexp"), args=_commas(args))
    return None


def _log1p_fixes(ctx: _Context) -> list[_Proposal]:
    eps = _num(ctx.eps1)
    return _clamp_fix(ctx, lo_text=f"-1 + {eps}", words=f"to >= -1 + {eps}")


def _root_fixes(ctx: _Context) -> list[_Proposal]:
    # eps rather than 0: sqrt's gradient is infinite at 0 and rsqrt(0) is inf.
    return _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)}")


def _div_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = []
    if isinstance(ctx.node, cst.BinaryOperation):
        softmax = _manual_softmax(ctx, ctx.node)
        if softmax is not None:
            proposals.append(softmax)
    return proposals + _div_guard(ctx)


def _div_guard(ctx: _Context) -> list[_Proposal]:
    operand = _operand(ctx)
    if operand is None or operand.form in ("math", "numpy"):
        return []
    x = operand.node
    eps = ctx.eps_text
    label = "divisor" if ctx.op.split(".")[-1] not in ("reciprocal", "reciprocal_") else "operand"
    if _nonnegative(ctx, x) or ctx.operand_nonnegative:
        suffix = "_" if operand.form == "inplace" and ctx.op.endswith("reciprocal_") else ""
        guarded = _method(x, "clamp_min" + suffix, eps)
        title = f"Clamp the {label} of {_op_label(ctx)} to >= {eps}{ctx.dtype_note()}"
    else:
        guarded = _sign_preserving_guard(ctx, x)
        if operand.form == "inplace" and ctx.op.endswith("reciprocal_"):
            return []  # an in-place reciprocal of a signed tensor has no in-place guard spelling
        title = (
            f"Keep the {label} of {_op_label(ctx)} at least {eps} away from 0 (sign kept){ctx.dtype_note()}"
        )
    return [_Proposal(title, ctx.node, _replace(ctx, x, guarded))]


def _exp_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = _exp_patterns(ctx)
    base = ctx.op.rsplit(".", 1)[-1]
    base = base if base.startswith("__") else base.rstrip("_")
    ln_max = ctx.limits.ln_max
    if base == "exp2":
        bound = math.floor(ln_max / math.log(2) * 10) / 10
    elif base == "__rpow__":
        if not isinstance(ctx.node, cst.BinaryOperation):
            return proposals
        left = _strip(ctx.node.left)
        if not isinstance(left, (cst.Integer, cst.Float)) or float(left.value) <= 1:
            return proposals
        bound = math.floor(ln_max / math.log(float(left.value)) * 10) / 10
    else:
        bound = math.floor(ln_max * 10) / 10
    b = _num(bound)
    if base in ("cosh", "sinh"):
        # both overflow on the negative side too
        return proposals + _clamp_fix(ctx, lo_text=f"-{b}", hi_text=b, words=f"to [-{b}, {b}]")
    return proposals + _clamp_fix(ctx, hi=bound, words=f"to <= {b} (above it the result overflows to inf)")


def _exp_patterns(ctx: _Context) -> list[_Proposal]:
    """exp inside log(sum(exp(x))) -> logsumexp; exp(x) / exp(x).sum(d) -> softmax;
    log(1 + exp(x)) -> softplus. The edit then replaces the enclosing expression."""
    if ctx.op not in ("torch.exp", "torch.Tensor.exp") or not isinstance(ctx.node, cst.Call):
        return []
    operand = _operand(ctx)
    if operand is None:
        return []
    x = operand.node
    parent = ctx.index.parent(ctx.node)
    # exp(x) / exp(x).sum(dim, keepdim=True) -> softmax(x, dim), from either exp
    if isinstance(parent, cst.BinaryOperation):
        softmax = _manual_softmax(ctx, parent)
        if softmax is not None:
            return [softmax]
    if isinstance(parent, cst.Attribute):
        total = ctx.index.parent(parent)
        div = ctx.index.parent(total) if total is not None else None
        if isinstance(div, cst.BinaryOperation) and _strip(div.right) is total:
            softmax = _manual_softmax(ctx, div)
            if softmax is not None:
                return [softmax]
    # log(sum(exp(x))) -> logsumexp
    total = parent
    if isinstance(total, cst.Attribute):  # x.exp().sum(...): the Attribute's parent is the call
        total = ctx.index.parent(total)
    outer = ctx.index.parent(total) if total is not None else None
    if isinstance(outer, cst.Attribute):
        outer = ctx.index.parent(outer)
    if isinstance(total, cst.Call) and isinstance(outer, cst.Call):
        lse = _logsumexp_of(ctx, total)
        outer_callee = ctx.index.callee(outer)
        if lse is not None and outer_callee in (("function", "torch.log"), ("method", "log")):
            return [_Proposal("Use logsumexp", outer, lse)]
    # log(1 + exp(x)) -> softplus(x)
    one = _strip(parent.left) if isinstance(parent, cst.BinaryOperation) else None
    if (
        isinstance(parent, cst.BinaryOperation)
        and isinstance(parent.operator, cst.Add)
        and isinstance(one, cst.Integer)
        and one.value == "1"
    ):
        outer = ctx.index.parent(parent)
        outer_callee = ctx.index.callee(outer) if outer is not None else None
        if outer_callee == ("function", "torch.log") and isinstance(outer, cst.Call) and len(outer.args) == 1:
            ns, imports = ctx.functional()
            return [_Proposal(f"Use {ns}.softplus", outer, _call(f"{ns}.softplus", _strip(x)), imports)]
    return []


def _manual_softmax(ctx: _Context, div: cst.BinaryOperation) -> _Proposal | None:
    """``exp(x) / exp(x).sum(dim, keepdim=True)`` (any spelling of exp) -> ``softmax(x, dim)``."""
    if not isinstance(div.operator, cst.Divide):
        return None
    numerator, total = _strip(div.left), _strip(div.right)
    num_callee, total_callee = ctx.index.callee(numerator), ctx.index.callee(total)
    if (
        not isinstance(numerator, cst.Call)
        or not isinstance(total, cst.Call)
        or total_callee != ("method", "sum")
    ):
        return None
    assert isinstance(total.func, cst.Attribute)
    code = ctx.module.code_for_node
    if code(_strip(total.func.value)) != code(numerator):
        return None
    dim = _arg(total, 0, "dim")
    if dim is None:
        return None
    # keep `dim=` when the code wrote it
    dim_arg = cst.Arg(
        _strip(dim.value), keyword=dim.keyword, equal=dim.equal if dim.keyword else cst.MaybeSentinel.DEFAULT
    )
    if num_callee == ("method", "exp") and isinstance(numerator.func, cst.Attribute) and not numerator.args:
        new: cst.BaseExpression = cst.Call(
            func=cst.Attribute(value=_atom(numerator.func.value), attr=cst.Name("softmax")), args=[dim_arg]
        )
    elif (
        num_callee == ("function", "torch.exp")
        and len(numerator.args) == 1
        and isinstance(numerator.func, cst.Attribute)
    ):
        ns = _dotted(numerator.func.value)
        new = cst.Call(
            func=_expr(f"{ns}.softmax"), args=_commas([cst.Arg(_strip(numerator.args[0].value)), dim_arg])
        )
    else:
        return None
    return _Proposal("Use softmax", div, new)


def _pow_fixes(ctx: _Context) -> list[_Proposal]:
    operand = _operand(ctx)
    if operand is None:
        return []
    exponent = _exponent(ctx)
    if (
        exponent is not None
        and exponent < 0
        and float(exponent).is_integer()
        and operand.form in ("function", "method", "binary")
    ):
        # a negative integer power is only undefined at 0; clamping would flip odd powers of
        # negative bases, so keep the sign like a divisor guard
        guarded = _sign_preserving_guard(ctx, operand.node)
        eps = _num(ctx.eps)
        return [
            _Proposal(
                f"Keep the base of {_op_label(ctx)} at least {eps} away from 0 (sign kept)",
                ctx.node,
                _replace(ctx, operand.node, guarded),
            )
        ]
    return _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)}")


def _exponent(ctx: _Context) -> float | None:
    node = ctx.node
    value: cst.BaseExpression | None = None
    if isinstance(node, (cst.BinaryOperation, cst.AugAssign)):
        value = node.right if isinstance(node, cst.BinaryOperation) else node.value
    elif isinstance(node, cst.Call):
        row = OP_TABLE.get(_spelled_name(ctx, node)) or OP_TABLE.get(ctx.op)
        method = _is_method_call(ctx, node)
        idx = (row.aux_index if row and row.aux_index is not None else 1) - (1 if method else 0)
        arg = _arg(node, idx, "exponent")
        value = arg.value if arg else None
    if value is None:
        return None
    value = _strip(value)
    sign = 1.0
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        sign, value = -1.0, _strip(value.expression)
    if isinstance(value, (cst.Integer, cst.Float)):
        return sign * float(value.value)
    return None


def _acos_fixes(ctx: _Context) -> list[_Proposal]:
    e = _num(ctx.eps1)
    # asin/acos are finite at +-1 but their gradient is not: keep eps inside
    return _clamp_fix(ctx, lo_text=f"-1 + {e}", hi_text=f"1 - {e}", words=f"to [-1 + {e}, 1 - {e}]")


def _acosh_fixes(ctx: _Context) -> list[_Proposal]:
    return _clamp_fix(ctx, lo_text="1.0", words="to >= 1")


def _lgamma_fixes(ctx: _Context) -> list[_Proposal]:
    return _clamp_fix(ctx, ctx.eps, words=f"to >= {_num(ctx.eps)} (away from the poles)")


def _logit_fixes(ctx: _Context) -> list[_Proposal]:
    node = ctx.node
    if not isinstance(node, cst.Call):
        return []
    e = _num(ctx.eps1)
    existing = _arg(node, 0 if _is_method_call(ctx, node) else 1, "eps")
    new_arg = cst.Arg(
        _expr(e),
        keyword=cst.Name("eps"),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if existing is not None:
        if not (isinstance(existing.value, cst.Name) and existing.value.value == "None"):
            return []
        new = node.deep_replace(existing, existing.with_changes(value=_expr(e)))
    else:
        new = node.with_changes(args=_commas([*node.args, new_arg]))
    return [_Proposal(f"Pass eps={e} to {_op_label(ctx)}", node, new)]


def _softmax_fixes(ctx: _Context) -> list[_Proposal]:
    # -inf -> the dtype's lowest finite value: a fully masked row becomes uniform instead of NaN,
    # and every other row is unchanged (exp underflows to exactly 0 either way).
    lowest = _num(-ctx.limits.max)
    return _clamp_fix(
        ctx, lo_text=lowest, words=f"to >= {lowest} (mask with the lowest finite value, not -inf)"
    )


def _var_fixes(ctx: _Context) -> list[_Proposal]:
    node = ctx.node
    if not isinstance(node, cst.Call):
        return []
    for a in node.args:
        if a.keyword is not None and a.keyword.value == "unbiased":
            new = node.deep_replace(a.value, cst.Name("False"))
            return [_Proposal("Use unbiased=False (population variance: defined for one element)", node, new)]
        if a.keyword is not None and a.keyword.value == "correction":
            new = node.deep_replace(a.value, cst.Integer("0"))
            return [_Proposal("Use correction=0 (population variance: defined for one element)", node, new)]
    # `var(x, 0, True)` / `x.var(0, True)`: a positional bool is `unbiased`
    for a in node.args:
        if a.keyword is None and isinstance(a.value, cst.Name) and a.value.value == "True":
            new = node.deep_replace(a.value, cst.Name("False"))
            return [_Proposal("Use unbiased=False (population variance: defined for one element)", node, new)]
    older_style = "unbiased=" in ctx.text
    keyword, value = ("unbiased", "False") if older_style else ("correction", "0")
    new = node.with_changes(args=_commas([*node.args, _kwarg(keyword, value)]))
    proposals = [
        _Proposal(f"Use {keyword}={value} (population variance: defined for one element)", node, new)
    ]
    # The same estimator wherever it was defined, 0 for a single element. It goes first: the
    # output does not change for inputs that did not hit the bug, while correction=0 silently
    # scales every result by (n-1)/n, which a program whose output cannot be compared (a
    # script) would not reveal.
    count = _reduced_count(ctx, node)
    if count is not None:
        guard = f"bool({count} > 1)" if older_style else f"int({count} > 1)"
        kept = node.with_changes(args=_commas([*node.args, _kwarg(keyword, guard)]))
        proposals.insert(
            0,
            _Proposal(f"Keep the unbiased estimate; {keyword}={value} only for a single element", node, kept),
        )
    return proposals


def _kwarg(keyword: str, value: str) -> cst.Arg:
    return cst.Arg(
        _expr(value),
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def _reduced_count(ctx: _Context, node: cst.Call) -> str | None:
    """Code for the number of elements a var/std call reduces over (no dim, or one simple dim)."""
    method = _is_method_call(ctx, node)
    if method:
        assert isinstance(node.func, cst.Attribute)
        x, rest = node.func.value, list(node.args)
    else:
        if not node.args:
            return None
        x, rest = node.args[0].value, list(node.args[1:])
    if not isinstance(_strip(x), (cst.Name, cst.Attribute)):
        return None  # the operand would be evaluated twice
    code = ctx.module.code_for_node(_strip(x))
    dims = [
        a
        for a in rest
        if (a.keyword is None and not isinstance(a.value, cst.Name))
        or (a.keyword is not None and a.keyword.value == "dim")
    ]
    if not dims:
        return f"{code}.numel()"
    dim = _strip(dims[0].value)
    if len(dims) == 1 and isinstance(dim, (cst.Integer, cst.UnaryOperation, cst.Name)):
        return f"{code}.size({ctx.module.code_for_node(dim)})"
    return None


def _mean_fixes(ctx: _Context) -> list[_Proposal]:
    """``x.mean()`` -> ``x.sum() / max(x.numel(), 1)``: 0 for an empty selection, same value otherwise."""
    node = ctx.node
    if not isinstance(node, cst.Call) or ctx.op.endswith("nanmean"):
        return []
    if _is_method_call(ctx, node):
        if not isinstance(node.func, cst.Attribute):
            return []
        x, rest = node.func.value, list(node.args)
        total_func = lambda args: cst.Call(  # noqa: E731
            func=cst.Attribute(value=_atom(x), attr=cst.Name("sum")), args=args
        )
    else:
        if not node.args or not isinstance(node.func, cst.Attribute):
            return []
        x, rest = node.args[0].value, list(node.args[1:])
        ns = _dotted(node.func.value)
        total_func = lambda args: cst.Call(func=_expr(f"{ns}.sum"), args=_commas([cst.Arg(_strip(x)), *args]))  # noqa: E731
    if any(a.keyword is not None and a.keyword.value not in ("dim", "keepdim") for a in rest):
        return []
    dims = [a for a in rest if a.keyword is None or a.keyword.value == "dim"]
    if not dims:
        count = _method(x, "numel")
    elif len(dims) == 1 and isinstance(_strip(dims[0].value), (cst.Integer, cst.Name, cst.UnaryOperation)):
        count = _method(x, "size", _strip(dims[0].value))
    else:
        return []
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest]
    new = cst.BinaryOperation(
        left=total_func(_commas(args)),
        operator=cst.Divide(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=_call("max", count, "1"),
    )
    return [_Proposal("Divide the sum by max(count, 1) (0 for an empty selection)", node, new)]


_BUILDERS = {
    "log": _log_fixes,
    "log1p": _log1p_fixes,
    "sqrt": _root_fixes,
    "rsqrt": _root_fixes,
    "div": _div_fixes,
    "exp": _exp_fixes,
    "pow": _pow_fixes,
    "acos": _acos_fixes,
    "atanh": _acos_fixes,
    "acosh": _acosh_fixes,
    "lgamma": _lgamma_fixes,
    "logit": _logit_fixes,
    "softmax": _softmax_fixes,
    "var": _var_fixes,
    "mean": _mean_fixes,
}
