"""The site finder: every candidate unsafe operation in one module.

Walks the syntax tree once and reports, as ``Candidate``s carrying a
``model.Site``:

* calls whose callee resolves (through import aliases) to a catalogue row:
  ``torch.log(x)``, ``th.special.log1p(x)``, ``math.sqrt(v)``, ``np.log(a)``;
* Tensor methods on any receiver that is not known to be something else
  (a module, a string, a Python number, ``self`` of a non-tensor class):
  ``x.log()``, ``(a - b).sqrt()``, ``self.fc(x).exp()``, ``x.log_()``;
* products and reductions (``*``, ``@``, ``**``, ``sum``, ``var``, ``norm`` ...) whose operands
  may be float16 (analyzer/precision.py): their result may pass 65504 (``overflow``);
* operators ``/ // % **`` and ``/= //= %= **=`` unless both sides are known
  Python numbers, the left side is a string (``"%d" % n``) or a path-like
  object, or the exponent is a non-negative integer literal; a number on the
  left and a tensor (or unknown) on the right is the reflected form
  (``1 / x`` -> ``torch.Tensor.__rtruediv__``, operand ``x``).

``Site.span`` is the whole expression (the call, the binary operation, the
augmented assignment statement) exactly as CPython's ``co_positions`` reports
it for the CALL/BINARY_OP instruction, so the tracer can match events to
sites. ``SAFE_FORMS`` are never sites. ``safe_when`` keywords (``correction=0``)
are recorded on the candidate for the verdict.

The static pass reads CPython's own ``ast`` rather than a libcst tree: its
positions are by construction the ones ``co_positions`` reports at run time
(tests/test_static.py checks every corpus site against the compiled code), and
libcst 1.9 took ~0.3 s to parse plus ~2.3 s of metadata (scopes, qualified
names, positions) for a 2,000-line file here, against a budget of 0.3 s for
the whole pass. Alias resolution (what QualifiedNameProvider would give) is
names.py over the dataflow graph.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from grist_lsp.analyzer.bindings import CONSTANTS
from grist_lsp.analyzer.catalogue import (
    AUGMENTED_OPERATORS,
    BINARY_OPERATORS,
    DTYPES,
    KINDS,
    OP_TABLE,
    REFLECTED_OPERATORS,
    SAFE_FORMS,
    SCALAR_OPERATORS,
    Op,
    loud_error,
)
from grist_lsp.analyzer.dataflow import DataFlow
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.positions import SourceLines, node_words
from grist_lsp.analyzer.precision import Precision, spells_half
from grist_lsp.analyzer.printed import printed_operations
from grist_lsp.analyzer.provenance import Provenance
from grist_lsp.analyzer.ranges import INF, RangeAnalysis, static_safe
from grist_lsp.analyzer.size_divisors import SizeDivisors
from grist_lsp.analyzer.tensors import ArrayOrigins, Origin
from grist_lsp.model import Site

_OPERATOR_NAMES = {
    ast.Div: "Divide",
    ast.FloorDiv: "FloorDivide",
    ast.Mod: "Modulo",
    ast.Pow: "Power",
    ast.Mult: "Multiply",
    ast.Add: "Add",
    ast.Sub: "Subtract",
    ast.MatMult: "MatrixMultiply",
}
_AUG_NAMES = {
    ast.Mult: "MultiplyAssign",
    ast.Add: "AddAssign",
    ast.Sub: "SubtractAssign",
    ast.Div: "DivideAssign",
    ast.FloorDiv: "FloorDivideAssign",
    ast.Mod: "ModuloAssign",
    ast.Pow: "PowerAssign",
}


# A literal with a two-digit positive exponent (1e39, 1E+40): past float32's range or close to it.
_BIG_EXPONENT = re.compile(r"\d[eE]\+?\d{2,}|\d{39,}")


# A numeric literal (no sign): the float16 check below reads its value.
_NUMBER = re.compile(r"(?<![\w.])\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?")


def _may_spell_infinity(text: str, dtype: str) -> bool:
    """Whether the source can hold an infinity the program puts there: the word inf anywhere
    (``float("-inf")``, ``math.inf``, ``torch.inf``, ``np.inf``, ``"Infinity"``), a literal past
    float32's range, or, in a float16 file, one past 65504 (``-1e9`` is ``-inf`` there). Without
    one no inf_arith site can exist, and the file's ``+ - * @`` need no look: the static pass runs
    on every keystroke, and those operators are most of a file's operations."""
    if "inf" in text.lower() or _BIG_EXPONENT.search(text) is not None:
        return True
    return dtype == "float16" and any(
        float(m.group().replace("_", "")) > DTYPES["float16"].max for m in _NUMBER.finditer(text)
    )


_STR_METHODS = frozenset(name for name in dir(str) if not name.startswith("_"))


def _is_text(e: ast.AST, flow: DataFlow, depth: int = 0) -> bool:
    """A string by its spelling: a literal, an f-string, text repeated or joined (``"%g " * n``),
    a ``str`` method of text (``("%g " * n).rstrip()``, ``", ".join(names)``), a name every
    definition of which binds text (``pf = "%22s" + "%11i" * 2``)."""
    if depth > 8:
        return False
    if isinstance(e, ast.JoinedStr) or (isinstance(e, ast.Constant) and isinstance(e.value, str)):
        return True
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mult)):
        return _is_text(e.left, flow, depth + 1) or (
            isinstance(e.op, ast.Add) and _is_text(e.right, flow, depth + 1)
        )
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _STR_METHODS:
        return _is_text(e.func.value, flow, depth + 1)
    if isinstance(e, ast.Name) and flow.is_use(e):
        defs = flow.defs_reaching(e)
        return bool(defs) and all(
            d.how == "assign" and d.value is not None and _is_text(d.value, flow, depth + 1) for d in defs
        )
    return False


def _divisibility_tests(flow: DataFlow) -> frozenset[int]:
    """The ids of the ``%`` operations a program compares with 0 (``numer % denom == 0``): a
    divisibility test, on integers, where a zero divisor raises instead of making NaN."""
    return frozenset(
        id(c.left)
        for c in flow.comparisons.values()
        if isinstance(c.left, ast.BinOp)
        and isinstance(c.left.op, ast.Mod)
        and len(c.ops) == 1
        and isinstance(c.ops[0], (ast.Eq, ast.NotEq))
        and isinstance(c.comparators[0], ast.Constant)
        and c.comparators[0].value == 0
    )


def _computed_difference(e: ast.AST, flow: DataFlow) -> bool:
    """``a - b`` with neither side a literal, spelled out or bound to a name (``c = 1 - a_next -
    sigma ** 2; c.sqrt()``): two computed values can cancel, and float32 rounding puts the
    difference of nearly equal constants below 0 where it is >= 0 exactly."""
    if isinstance(e, ast.Name) and flow.is_use(e):
        defs = flow.defs_reaching(e)
        value = defs[0].value if len(defs) == 1 and defs[0].how == "assign" else None
        return isinstance(value, ast.BinOp) and _computed_difference(value, flow)
    return (
        isinstance(e, ast.BinOp)
        and isinstance(e.op, ast.Sub)
        and not isinstance(e.left, ast.Constant)
        and not isinstance(e.right, ast.Constant)
    )


@dataclass
class Candidate:
    """A site plus what the verdict needs: the operand expression (None when the
    operand is implicit), the exponent for pow, and a ``safe_when`` match."""

    site: Site
    node: ast.AST
    operand: ast.AST | None
    exponent: ast.AST | None = None
    safe_keyword: str | None = None  # e.g. "correction=0"
    clamp: ast.AST | None = None  # torch.logit's eps: the op clamps the operand to [eps, 1 - eps]
    why: str | None = None  # how the operand may reach a shape region (zero elements, -inf rows)
    # Why an op on Python values only is no NaN/INF site: Python raises there (catalogue.loud_error),
    # or the operator joins paths. The verdict's whole reason.
    scalar: str | None = None


def _sized_operands(e: ast.AST) -> list[ast.AST]:
    """The tensors whose sizes an expression reads: ``len(x)``, ``x.shape[k]``, ``x.size(k)``,
    ``x.numel()``."""
    found = []
    for n in ast.walk(e):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" and n.args:
            found.append(n.args[0])
        elif isinstance(n, ast.Attribute) and n.attr == "shape":
            found.append(n.value)
        elif (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("size", "numel")
        ):
            found.append(n.func.value)
    return found


def _is_const(e: ast.AST) -> bool:
    """A numeric constant expression (no names, no calls): 2, -1.5, 2 * 3."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return _is_const(e.operand)
    if isinstance(e, ast.BinOp):
        return _is_const(e.left) and _is_const(e.right)
    return False


_ARITH = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


def _const_value(e: ast.AST) -> float | None:
    """The value of a numeric constant expression, or None."""
    try:
        if (
            isinstance(e, ast.Constant)
            and isinstance(e.value, (int, float))
            and not isinstance(e.value, bool)
        ):
            return float(e.value)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            v = _const_value(e.operand)
            return None if v is None else (-v if isinstance(e.op, ast.USub) else v)
        if isinstance(e, ast.BinOp) and type(e.op) in _ARITH:
            a, b = _const_value(e.left), _const_value(e.right)
            if a is None or b is None or (isinstance(e.op, ast.Pow) and abs(b) > 1e4):
                return None
            v = _ARITH[type(e.op)](a, b)
            return float(v) if not isinstance(v, complex) else None
    except (ArithmeticError, ValueError, TypeError):
        return None
    return None


def _nonneg_int_literal(e: ast.AST) -> bool:
    v = _const_value(e) if not isinstance(e, ast.UnaryOp) else None
    return v is not None and v >= 0 and float(v).is_integer()


class SiteFinder:
    """Decides, operation by operation, what is a site; ``find_sites`` is the entry point."""

    def __init__(
        self, path: str, lines: SourceLines, flow: DataFlow, resolver: Resolver, ranges: RangeAnalysis
    ) -> None:
        self.path = path
        self.lines = lines
        self.flow = flow
        self.resolver = resolver
        self.ranges = ranges
        self.provenance = Provenance(flow, resolver, ranges)
        self.origins = ArrayOrigins(flow, resolver)
        self.size_divisors = SizeDivisors(
            flow, self.origins, self.provenance, lambda e: self._setting_divisor(e) is not None
        )
        self.infinities = _may_spell_infinity(lines.text, ranges.dtype)
        self.printed = printed_operations(flow, resolver)
        self.divisibility_tests = _divisibility_tests(flow)
        self.precision = (
            Precision(flow, resolver, ranges, self.provenance) if spells_half(lines.text) else None
        )
        self.function: str | None = None  # dotted name of the def/class around the current node
        self._constants: dict[int, bool] = {}  # id(expr) -> numeric constant? (memo: chains are deep)
        self.found: list[Candidate] = []

    # --- sites -----------------------------------------------------------------

    def _add(
        self,
        node: ast.AST,
        op: Op,
        operand: ast.AST | None,
        exponent: ast.AST | None = None,
        safe_keyword: str | None = None,
        clamp: ast.AST | None = None,
        others: tuple[ast.AST | None, ...] = (),
        scalar: str | None = None,
    ) -> None:
        """``others``: the tensors besides ``operand`` that a product or sum combines with it;
        ``scalar``: words on the Python numbers an op that raises on them is made of."""
        why = None
        label = op.operand_label
        region = KINDS[op.kind].region
        if scalar is None and id(node) in self.printed:
            scalar = "its value only goes into a message or a log: a NaN/INF there shows, not silently"
        if scalar is None and op.kind == "div" and operand is not None:
            scalar = self._setting_divisor(operand) or self.size_divisors.why_nonzero(operand)
        if scalar is None and operand is not None and self._constant_value_site(op, operand):
            if exponent is None or not self.origins.may_be_array(exponent) or self.origins.constant(exponent):
                words = node_words(operand, "the operand")
                scalar = (
                    f"{words} is computed from the program's settings only (constants, sizes, "
                    "hyper-parameters): the same on every run, not a value data or training moves"
                )
        if scalar is not None:
            self._append(node, op, label, None, operand, scalar=scalar)
            return
        # Kinds that are NaN only for operands programs make on purpose are sites only
        # when such an operand may reach them (reporting every mean and every softmax
        # buried the real findings): zero elements for a mean, -inf entries for a softmax.
        if region.shape == "empty":
            why = self.provenance.may_be_empty(operand)
            if why is None:
                return
        elif "inf" in region.inf_operands:
            found = self._infinity_meets(op, operand, others)
            if found is None:
                return
            label, why = found
        elif region.inf_operands:
            why = self.provenance.softmax_row_risk(operand, node)
            if why is None:
                return
        elif region.beyond_max:
            # the op runs in float16 when its result is float16 (autocast sums run in float32)
            why = self.precision.half(node) if self.precision is not None else None
            if why is None:
                return
        half = why if region.beyond_max else self.precision.half(operand) if self.precision else None
        self._append(node, op, label, half, operand, exponent, safe_keyword, clamp, why)

    def _append(
        self,
        node: ast.AST,
        op: Op,
        label: str,
        half: str | None,
        operand: ast.AST | None,
        exponent: ast.AST | None = None,
        safe_keyword: str | None = None,
        clamp: ast.AST | None = None,
        why: str | None = None,
        scalar: str | None = None,
    ) -> None:
        span = self.lines.span(node)
        site = Site(
            file=self.path,
            span=span,
            op=op.name,
            kind=op.kind,
            operand=label,
            text=self.lines.text_of(span),
            function=self.function,
            dtype="float16" if half is not None else None,
        )
        self.found.append(Candidate(site, node, operand, exponent, safe_keyword, clamp, why, scalar))

    def _infinity_meets(
        self, op: Op, left: ast.AST | None, others: tuple[ast.AST | None, ...]
    ) -> tuple[str, str] | None:
        """Which side of a product, contraction, sum or difference may bring the program's
        infinity to a partner that makes it NaN ("left", "right", "both"), and how; or None."""
        if not self.infinities:
            return None
        right = others[0] if others else None
        prov = self.provenance
        if op.inf_pair:
            # inf + -inf, or inf - inf: both sides, with the signs the op needs
            signs = ((1, -1), (-1, 1)) if op.inf_pair == "opposite" else ((1, 1), (-1, -1))
            for a, b in signs:
                first = prov.may_hold_inf_of_sign(left, a)
                second = prov.may_hold_inf_of_sign(right, b) if first is not None else None
                if first is not None and second is not None:
                    return "both", "; ".join(dict.fromkeys((first, second)))
            return None
        # 0 * inf: one infinite side is enough, unless the other is a number that is never 0
        why = {side: prov.may_hold_inf(e) for side, e in (("left", left), ("right", right))}
        flagged = {side: w for side, w in why.items() if w is not None}
        if not flagged:
            return None
        partner = right if "left" in flagged else left
        if len(flagged) == 1 and partner is not None and self._nonzero_number(partner):
            return None  # inf times a number that is never 0 is inf, not NaN
        label = next(iter(flagged)) if len(flagged) == 1 else "both"
        return label, "; ".join(dict.fromkeys(flagged.values()))

    def _setting_divisor(self, divisor: ast.AST | None) -> str | None:
        """Why a division by a Python number is no NaN/INF site, or None. A Python divisor (a
        hyper-parameter, a constant, a counter) is zero only by the program's own settings, which
        raise or are a typo, not by data or training; a size is not (``x.sum() / len(kept)`` with
        ``kept`` a filtered list, ``/ (h * w)`` of an empty feature map): the range analysis judges it."""
        if divisor is None or isinstance(divisor, ast.Constant):
            return None
        if self.ranges.fact(divisor).pytype != "num" and self.origins.origin(divisor) is not Origin.SCALAR:
            return None
        if self.origins.is_path(divisor) or self._reads_size(divisor):
            return None
        if self._sets_zero(divisor):
            return None  # self.scale = 0.0 somewhere: the program itself sets the zero
        words = node_words(divisor, "a number")
        return (
            f"the divisor ({words}) is a Python number, a setting or a constant of the program: "
            "data and training never move it to 0"
        )

    def _constant_value_site(self, op: Op, operand: ast.AST) -> bool:
        """An elementwise site whose operand is computed from the program's settings only
        (``tensors.Origin.CONSTANT``) and not known to reach the region."""
        region = KINDS[op.kind].region
        if region.matrix or region.shape or region.gradient or region.beyond_max or region.inf_operands:
            return False
        if region.lo is not None and _computed_difference(operand, self.flow):
            return False  # sqrt(1 - a_next - sigma ** 2): exact >= 0, below 0 once float32 rounds
        return self.origins.constant(operand) and not self._reaches(op, operand)

    def _reaches(self, op: Op, e: ast.AST) -> bool:
        """Whether the range analysis bounds ``e`` on both sides and the bounds meet the op's
        region (``g = torch.linspace(-1, 1, n); g.log()``): a constant the pass can follow is judged
        by its range; one it cannot bound (``1 - cumprod(...)``) by its constancy."""
        fact = self.ranges.fact(e)
        if fact.pytype == "bottom" or fact.lo == -INF or fact.hi == INF:
            return False
        if op.kind == "div":
            return fact.lo <= 0.0 <= fact.hi and not fact.nonzero
        return not static_safe(fact, KINDS[op.kind].region, self.ranges.dtype)

    def _sets_zero(self, e: ast.AST, depth: int = 0) -> bool:
        """Whether the divisor is a name or ``self.`` attribute that the program binds to a literal 0
        somewhere (``self.scale = 0.0`` in a reset method), directly or through plain copies."""
        if depth > 4 or not isinstance(e, (ast.Name, ast.Attribute)) or not self.flow.is_use(e):
            return False
        for d in self.flow.defs_reaching(e):
            v = d.value if d.how in ("assign", "attr", "walrus") else None
            if isinstance(v, ast.Constant) and not isinstance(v.value, (bool, str)) and v.value == 0:
                return True
            if v is not None and self._sets_zero(v, depth + 1):
                return True
        return False

    def _reads_size(self, e: ast.AST, depth: int = 0) -> bool:
        """Whether ``e`` reads a size (``len(x)``, ``x.shape[k]``, ``x.size(k)``, ``x.numel()``),
        directly or through names bound to one (``b, c, h, w = x.shape``)."""
        if _sized_operands(e):
            return True
        if depth > 4:
            return False
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and self.flow.is_use(n):
                for d in self.flow.defs_reaching(n):
                    if (
                        d.how in ("assign", "unpack", "aug")
                        and d.value is not None
                        and self._reads_size(d.value, depth + 1)
                    ):
                        return True
        return False

    def _nonzero_number(self, e: ast.AST) -> bool:
        fact = self.ranges.fact(e)
        return fact.pytype == "num" and (fact.lo > 0 or fact.hi < 0)

    @staticmethod
    def _arg(call: ast.Call, index: int, keyword: str | None) -> ast.expr | None:
        for k in call.keywords:
            if keyword is not None and k.arg == keyword:
                return k.value
        for a in call.args[: index + 1]:
            if isinstance(a, ast.Starred):
                return None
        return call.args[index] if 0 <= index < len(call.args) else None

    @staticmethod
    def _safe_keyword(op: Op, call: ast.Call) -> str | None:
        for k in call.keywords:
            for key, value in op.safe_when:
                if (
                    k.arg == key
                    and isinstance(k.value, ast.Constant)
                    and type(k.value.value) is type(value)
                    and k.value.value == value
                ):
                    return f"{key}={value!r}"
        return None

    def visit_Call(self, node: ast.Call) -> None:
        qn = self.resolver.qualified_name(node.func)
        if qn is not None:
            if qn in SAFE_FORMS:
                return
            rows = self._rows(qn)
            if not rows:
                return
            if node.args and all(self._constant(a) for a in node.args) and not node.keywords:
                return  # math.log(2 * math.pi): a constant, computed once, no tensor involved
            for op in rows:
                self._function_call(node, op)
            return
        if not isinstance(node.func, ast.Attribute):
            return
        name = f"torch.Tensor.{node.func.attr}"
        rows = self._rows(name)
        if not rows or name in SAFE_FORMS:
            return
        receiver = self.ranges.method_receiver(node)
        if receiver is None:
            return  # not a Tensor method: self.var(h) with self.var an nn.Linear, logger.log(...)
        if self.flow.callee(node) is not None:
            return  # self.log(...) calling a method defined in this file
        for op in rows:
            self._method_call(node, op, receiver)

    def _rows(self, name: str) -> tuple[Op, ...]:
        """The catalogue rows of ``name`` whose kind may have a site in this file at all."""
        return tuple(op for op in OP_TABLE.get(name, ()) if self._kind_possible(op.kind))

    def _kind_possible(self, kind: str) -> bool:
        """False for a kind that needs what the file cannot make: an intended infinity in a file
        that spells none (``_may_spell_infinity``), a float16 tensor in one that spells no half
        precision (``precision.spells_half``)."""
        region = KINDS[kind].region
        if "inf" in region.inf_operands and not self.infinities:
            return False
        return not (region.beyond_max and self.precision is None)

    def _function_call(self, node: ast.Call, op: Op) -> None:
        operand = self._arg(node, op.operand_index, op.operand_keyword)
        exponent = self._arg(node, op.aux_index, op.aux_keyword) if op.aux_index is not None else None
        if exponent is not None and _nonneg_int_literal(exponent):
            return
        clamp = self._arg(node, op.clamp_index, op.clamp_keyword) if op.clamp_index is not None else None
        others = tuple(a for a in node.args[op.operand_index + 1 :] if not isinstance(a, ast.Starred))
        scalar = None
        loud = loud_error(op.name, op.kind)
        if loud is not None and operand is not None:
            # math.* converts its argument to a Python float (a one-element tensor too) and raises
            operands = [operand, *([exponent] if exponent is not None else [])]
            scalar = f"Python numbers ({self._words(operands)}): raises {loud}, not NaN/INF"
        self._add(node, op, operand, exponent, self._safe_keyword(op, node), clamp, others, scalar)

    def _method_call(self, node: ast.Call, op: Op, receiver: ast.expr) -> None:
        if self._elementwise(op) and (node.args or any(k.arg != "out" for k in node.keywords)):
            return  # logger.log("msg", x): Tensor.log takes no arguments
        # For methods, argument index 0 is the tensor itself.
        operand = (
            receiver if op.operand_index == 0 else self._arg(node, op.operand_index - 1, op.operand_keyword)
        )
        exponent = None
        if op.aux_index is not None:
            exponent = self._arg(node, op.aux_index - 1, op.aux_keyword)
            if exponent is not None and _nonneg_int_literal(exponent):
                return
        clamp = self._arg(node, op.clamp_index - 1, op.clamp_keyword) if op.clamp_index is not None else None
        others = tuple(a for a in node.args if not isinstance(a, ast.Starred))
        self._add(node, op, operand, exponent, self._safe_keyword(op, node), clamp, others)

    @staticmethod
    def _elementwise(op: Op) -> bool:
        """Unary elementwise Tensor methods take no arguments (an eps-clamp argument aside); matrix
        ops take options (``A.cholesky(upper=True)``)."""
        region = KINDS[op.kind].region
        return (
            op.operand_index == 0
            and op.aux_index is None
            and region.shape is None
            and region.matrix is None
            and not region.beyond_max
            and op.clamp_index is None
        )

    def _constant(self, e: ast.AST) -> bool:
        """A numeric constant expression: literals, math.pi, math.sqrt(2 * math.pi) ..."""
        got = self._constants.get(id(e))
        if got is None:
            got = self._constants[id(e)] = self._is_constant(e)
        return got

    def _is_constant(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        if isinstance(e, (ast.Name, ast.Attribute)):
            return self.resolver.qualified_name(e) in CONSTANTS
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            return self._constant(e.operand)
        if isinstance(e, ast.BinOp):
            return self._constant(e.left) and self._constant(e.right)
        if isinstance(e, ast.Call) and not e.keywords and e.args:
            qn = self.resolver.qualified_name(e.func)
            return bool(qn and qn.startswith("math.")) and all(self._constant(a) for a in e.args)
        return False

    @staticmethod
    def _words(operands: Sequence[ast.AST]) -> str:
        return ", ".join(node_words(e, "a number") for e in operands)

    def _scalar_words(self, operands: list[ast.AST], node: ast.AST | None = None) -> str | None:
        """``a, b`` when no operand may be a tensor or an array (``tensors.ArrayOrigins``: Python
        numbers, paths, values of unknown origin), nor the result (``torch.log(w / a)``), else None."""
        if all(self.ranges.fact(e).pytype == "num" for e in operands):
            return self._words(operands)
        if any(self.ranges.fact(e).pytype == "tensor" or self.origins.may_be_array(e) for e in operands):
            return None
        if node is not None and self.origins.may_be_array(node):
            return None
        if self.precision is not None and any(self.precision.half(e) for e in operands):
            return None  # h = x.half(): a float16 tensor
        return self._words(operands)

    def _skip_operator(self, left: ast.AST, right: ast.AST) -> bool:
        if self._constant(left) and self._constant(right):
            return True
        lf, rf = self.ranges.fact(left), self.ranges.fact(right)
        if "str" in (lf.pytype, rf.pytype) or _is_text(left, self.flow):
            return True  # "%d" % n, path / "name", ("%g " * len(row)).rstrip() % row
        if lf.pytype in ("module", "none"):
            return True  # a module's or None's operators: not arithmetic
        return False

    def visit_BinOp(self, node: ast.BinOp) -> None:
        name = _OPERATOR_NAMES.get(type(node.op))
        if name is None:
            return
        rows = self._rows(BINARY_OPERATORS[name])
        if not rows or self._skip_operator(node.left, node.right):
            return
        scalar = self._scalar_words([node.left, node.right], node)
        if scalar is None and id(node) in self.divisibility_tests:
            scalar = "a divisibility test, n % k == 0: integers"
        if scalar is not None:
            self._scalar_operator(node, name, node.left, node.right, scalar)
            return
        left = self.ranges.fact(node.left)
        if self._constant(node.left) or left.pytype == "num":
            rows = self._rows(REFLECTED_OPERATORS[name])
        for op in rows:
            self._operator(node, op, node.left, node.right)

    def _scalar_operator(self, node: ast.AST, name: str, left: ast.AST, right: ast.AST, words: str) -> None:
        """``left OP right`` on Python values: a division or power raises instead of making NaN/INF
        (a safe site under a Python name), ``/`` on a path joins it; ``inf - inf`` and ``0 * inf``
        are NaN in Python too."""
        op = SCALAR_OPERATORS.get(name.removesuffix("Assign"))
        if op is None or not self._kind_possible(op.kind):
            return
        if KINDS[op.kind].region.inf_operands:
            self._operator(node, op, left, right)
        elif name.startswith("Divide") and self.origins.is_path(left):
            self._add(node, op, right, scalar=f"a path join ({words}): pathlib's /, not a division")
        elif op.kind != "pow" or not _nonneg_int_literal(right):
            loud = loud_error(op.name, op.kind)
            reason = f"Python numbers ({words}): raises {loud}, not NaN/INF"
            self._add(node, op, left if op.kind == "pow" else right, scalar=reason)

    def _operator(self, node: ast.AST, op: Op, left: ast.AST, right: ast.AST) -> None:
        """The site of ``left OP right`` (or ``left OP= right``): which side is the operand."""
        region = KINDS[op.kind].region
        if op.kind == "pow":
            if not _nonneg_int_literal(right):
                self._add(node, op, left, right)
        elif "inf" in region.inf_operands or region.beyond_max:
            self._add(node, op, left, others=(right,))
        else:
            self._add(node, op, right)

    def fallback(self, node: ast.AST) -> None:
        """An operator too deeply nested to classify: keep it as a site (nothing is proved), unless
        its kind is a site only when an operand is known to hold an intended infinity or to be
        float16."""
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATOR_NAMES:
            name = BINARY_OPERATORS[_OPERATOR_NAMES[type(node.op)]]
            left, right = node.left, node.right
        elif isinstance(node, ast.AugAssign) and type(node.op) in _AUG_NAMES:
            name = AUGMENTED_OPERATORS[_AUG_NAMES[type(node.op)]]
            left, right = node.target, node.value
        else:
            return
        for op in OP_TABLE[name]:
            region = KINDS[op.kind].region
            if not region.inf_operands and not region.beyond_max:
                self._operator(node, op, left, right)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        name = _AUG_NAMES.get(type(node.op))
        if name is None:
            return
        rows = self._rows(AUGMENTED_OPERATORS[name])
        if not rows:
            return
        target_read = node.target
        if isinstance(node.target, ast.Name) and not self.flow.is_use(node.target):
            target_read = None
        if target_read is not None and self._skip_operator(target_read, node.value):
            return
        scalar = self._scalar_words([target_read, node.value]) if target_read is not None else None
        if scalar is not None:
            self._scalar_operator(node, name, node.target, node.value, scalar)
            return
        for op in rows:
            self._operator(node, op, node.target, node.value)


def find_sites(
    path: str, lines: SourceLines, tree: ast.Module, flow: DataFlow, resolver: Resolver, ranges: RangeAnalysis
) -> list[Candidate]:
    """Every candidate site of the module, in source order."""
    finder = SiteFinder(path, lines, flow, resolver, ranges)
    # The dataflow walk already listed every call/binary operation/augmented
    # assignment with its enclosing def: no second walk of the tree.
    for node, function in flow.operations:
        finder.function = function
        try:
            if isinstance(node, ast.Call):
                finder.visit_Call(node)
            elif isinstance(node, ast.BinOp):
                finder.visit_BinOp(node)
            elif isinstance(node, ast.AugAssign):
                finder.visit_AugAssign(node)
        except RecursionError:
            finder.fallback(node)
    finder.found.sort(key=lambda c: _span_key(c.site))
    return finder.found


def _span_key(site: Site) -> tuple[int, int, int, int, str]:
    s = site.span
    return (s.start_line, s.start_col, s.end_line, s.end_col, site.op)
