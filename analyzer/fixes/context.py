"""What every fix builder works from: the site located in the libcst tree (``_Index``), the
site's ``_Context`` (its node, the dtype's limits and eps, the operand's proved range), the
``_Proposal`` a builder returns, and the import line a new name needs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource

from grist_lsp.analyzer.catalogue import DtypeLimits, dtype_limits
from grist_lsp.model import Fix, Span, TextEdit

# Mantissa bits per dtype: clamps next to +-1 (acos, atanh, log1p, logit) need an eps that
# survives ``1 - eps`` in the operand's dtype, which the catalogue's absolute eps (1e-8 for
# float32) does not: 1 - 1e-8 rounds back to 1.0 in float32 and atanh(1.0) is inf.
_MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}


_FUNCTIONAL = "torch.nn.functional"


_SOFTMAX_NAMES = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}


_SIGMOID_NAMES = {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}


_EXP_NAMES = {"torch.exp"}


_SUM_NAMES = {"torch.sum"}


def eps_for(dtype: str | None) -> float:
    """The absolute eps our clamp floors use for ``dtype`` (the catalogue's, float32 default)."""
    return dtype_limits(dtype).eps


def eps_near_one(dtype: str | None) -> float:
    """An eps that still moves a value off +-1 in ``dtype``: machine epsilon rounded up to 10^k."""
    limits = dtype_limits(dtype)
    machine = 2.0 ** -_MANTISSA_BITS.get(limits.name, 23)
    return max(limits.eps, 10.0 ** math.ceil(math.log10(machine)))


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
    operand_label: str = ""  # Site.operand: for inf_arith, which side may hold an infinity

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


def _paren(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


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
