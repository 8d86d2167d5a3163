"""The static pass' public API: source text or a file in, one Verdict per Site out.

``analyze_source`` parses, builds the dataflow graph, finds the sites and
decides each one from its operand's range: ``safe`` only when the range
proves the operand stays out of the kind's invalid region, else ``possible``.
``analyze_file`` reads a file first and turns unreadable input (binary,
undecodable, too large) into one ``error`` verdict. Neither raises.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import io
import math
import os
import re
import tokenize
import warnings

from grist_lsp.analyzer.catalogue import KINDS, pow_region_applies
from grist_lsp.analyzer.dataflow import build_dataflow
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.parsing import parse
from grist_lsp.analyzer.positions import SourceLines, node_words
from grist_lsp.analyzer.ranges import (
    TOP,
    Fact,
    RangeAnalysis,
    describe,
    fmt,
    pow_range_safe,
    round_up,
    static_safe,
)
from grist_lsp.analyzer.repairs import Repairs
from grist_lsp.analyzer.sites import Candidate, find_sites
from grist_lsp.analyzer.spectral import drop_unread_vectors
from grist_lsp.analyzer.where_branch import mark_where_branches, where_reason
from grist_lsp.model import OperandRange, Site, Status, Verdict, file_error

MAX_FILE_BYTES = 10 * 1024 * 1024  # larger files are almost surely generated data, not code

# Lower precision anywhere in the file: analyse every op at the lowest one (conservative).
_HALF = re.compile(r"(?<!b)float16|\.half\(\)|torch\.half\b|autocast")
_BF16 = re.compile(r"bfloat16")


_DOUBLE_DEFAULT = re.compile(r"set_default_dtype\(\s*(torch\.)?(float64|double)\s*\)")
_SINGLE = re.compile(r"float32|\.float\(\)|torch\.float\b|FloatTensor")


def file_dtype(text: str) -> str:
    """The dtype the ranges are rounded to and regions judged in: float32, unless the
    file mentions a lower precision anywhere, or makes float64 the default and never
    mentions float32."""
    if _HALF.search(text):
        return "float16"
    if _BF16.search(text):
        return "bfloat16"
    if _DOUBLE_DEFAULT.search(text) and not _SINGLE.search(text):
        return "float64"
    return "float32"


def analyze_source(path: str, text: str) -> list[Verdict]:
    """Static verdicts for one module's text, sorted by position. Never raises."""
    # The syntax tree is hundreds of thousands of objects for a large file, and
    # the cyclic collector re-traverses all of them on every gen-2 pass while we
    # allocate: pausing it halves the run time. The previous state is restored.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze_source(path, text)
    finally:
        if was_enabled:
            gc.enable()


def _analyze_source(path: str, text: str) -> list[Verdict]:
    if text.startswith("\ufeff"):
        text = text[1:]  # a BOM is not part of the code; columns count from after it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not our findings
            tree = parse(text, filename=path)
    except SyntaxError as e:
        line = e.lineno or 1
        col = max((e.offset or 1) - 1, 0)
        return [
            file_error(
                path, f"{path}:{line}: syntax error: {e.msg}; fix the syntax to analyse this file", line, col
            )
        ]
    except (ValueError, RecursionError, MemoryError) as e:
        return [
            file_error(
                path,
                f"{path}:1: cannot parse ({type(e).__name__}: {e}); the file is not analysable Python source",
            )
        ]
    try:
        return _analyze_tree(path, text, tree)
    except RecursionError:
        return [
            file_error(
                path,
                f"{path}:1: nesting too deep for the static pass; "
                "split the deepest expression to analyse this file",
            )
        ]
    except Exception as e:  # noqa: BLE001 - an analyzer bug must not take the editor or the CLI down
        where = _traceback_line(e)
        return [
            file_error(
                path,
                f"{path}:1: internal error in the static pass ({type(e).__name__}: {e} "
                f"at {where}); please report it with this file",
            )
        ]


def _traceback_line(e: BaseException) -> str:
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}" if tb is not None else "?"


def _analyze_tree(path: str, text: str, tree: ast.Module) -> list[Verdict]:
    lines = SourceLines(text)
    flow = build_dataflow(tree)
    resolver = Resolver(flow)
    dtype = file_dtype(text)
    ranges = RangeAnalysis(flow, resolver, dtype)
    candidates = drop_unread_vectors(find_sites(path, lines, tree, flow, resolver, ranges), tree)
    mark_where_branches(candidates, tree, text, flow, resolver)
    # A file that spells half precision somewhere (an autocast import) has its ranges rounded to
    # float16; a site whose operand the precision analysis never sees in float16 is judged in
    # float32 (a float64 schedule's clamp(min=1e-20) is not 0).
    single = RangeAnalysis(flow, resolver, "float32") if dtype == "float16" else None
    repairs = Repairs(tree, flow, resolver) if _MAY_RESET_INF.search(text) else None
    verdicts = [
        _with_where_reason(
            _reset_after(
                _verdict(c, single, "float32")
                if single is not None and c.site.dtype is None and not KINDS[c.site.kind].region.beyond_max
                else _verdict(c, ranges, dtype),
                c,
                repairs,
                ranges,
            )
        )
        for c in candidates
    ]
    # find_sites returns the sites sorted by position, so the verdicts are too
    return verdicts


# Text a file that resets infinities must hold (``repairs.py``): no tree walk without it.
_MAY_RESET_INF = re.compile(r"isinf|isfinite|nan_to_num|\binf\b|['\"]inf")


def _reset_after(v: Verdict, c: Candidate, repairs: Repairs | None, ranges: RangeAnalysis) -> Verdict:
    """A possible division or negative power whose only invalid result is an infinity, which the
    next statement resets in a value computed from data alone (``repairs.py``): safe."""
    if repairs is None or v.status is not Status.POSSIBLE or not _only_inf(c, ranges):
        return v
    try:
        reset = repairs.reset_after(c.node)
    except RecursionError:
        return v
    if reset is None:
        return v
    reason = (
        f"where the {_operand_words(c.site)} is 0 the result is an infinity, which {reset} resets before "
        "any read, and the value is computed from data alone (no gradient flows through it)"
    )
    return _safe(c.site, reason)


def _only_inf(c: Candidate, ranges: RangeAnalysis) -> bool:
    """The site's only invalid result is an infinity: a nonzero dividend over 0 (never 0 / 0), or a
    negative power of a base that is never negative (never NaN)."""
    node = c.node
    if c.site.kind == "div":
        dividend = node.left if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) else None
        if dividend is None:
            return False
        fact = ranges.fact(dividend)
        return fact.nonzero or fact.lo > 0 or fact.hi < 0
    if c.site.kind == "pow" and c.operand is not None and c.exponent is not None:
        exponent, base = ranges.fact(c.exponent), ranges.fact(c.operand)
        return exponent.hi < 0 and base.lo >= 0
    return False


def _with_where_reason(v: Verdict) -> Verdict:
    """A where-branch site that is not proved safe says why its discarded value still matters."""
    if v.site.discarded_by is None or v.status is not Status.POSSIBLE:
        return v
    clause = where_reason(v.site.discarded_by, v.site.kind)
    return dataclasses.replace(v, reason=f"{v.reason}; {clause}", message=f"{v.message}; {clause}")


def _verdict(c: Candidate, ranges: RangeAnalysis, dtype: str) -> Verdict:
    site = c.site
    kind = KINDS[site.kind]
    label = _operand_words(site)
    if c.safe_keyword is not None:
        reason = f"{c.safe_keyword} is passed, so a single element gives 0, not NaN"
        return _safe(site, reason)
    if site.kind == "log" and c.operand is not None and ranges.provenance.causal(c.operand):
        reason = (
            f"{label} is a 0/1 lower triangle: the -inf above its diagonal is an intended additive "
            "causal mask, and every row keeps log(1) = 0 on and below the diagonal"
        )
        return _safe(site, reason)
    if c.scalar is not None:
        return _safe(site, c.scalar)
    if kind.region.beyond_max:
        return _overflow_verdict(c, ranges)
    if c.why is not None:
        if kind.region.shape == "empty":
            reason = f"the operand may have zero elements ({c.why}), and {kind.region.text} gives NaN"
        elif "inf" in kind.region.inf_operands:
            reason = f"{_operand_words(site)} may hold an infinity ({c.why}), and {kind.region.text} is NaN"
        else:
            reason = f"the operand may hold -inf ({c.why}), and {kind.region.text} gives NaN"
        return _possible(site, reason)
    if kind.region.shape is not None:
        reason = f"depends on shapes ({kind.region.text}), which the static pass cannot bound"
        return _possible(site, reason)
    if kind.region.matrix is not None:
        reason = (
            f"depends on the matrix's spectrum ({kind.region.text}), which the static pass does not bound"
        )
        return _possible(site, reason)
    try:
        fact = ranges.fact(c.operand) if c.operand is not None else TOP
        if isinstance(c.node, ast.BinOp) and isinstance(c.node.op, ast.Div) and c.operand is c.node.right:
            fact = ranges.divisor(c.node)
        if c.clamp is not None:
            fact = _clamped(fact, ranges.fact(c.clamp), dtype)
    except RecursionError:
        fact = TOP
    if site.kind == "pow":
        return _pow_verdict(c, fact, ranges, dtype)
    at = kind.region.backward_at
    # math.sqrt / numpy.sqrt have no backward pass; only torch ops carry gradients
    if (
        at is not None
        and site.op.startswith("torch.")
        and static_safe(fact, kind.region, dtype)
        and fact.lo <= at <= fact.hi
        and not (at == 0.0 and fact.nonzero)
    ):
        reason = (
            f"{label} {describe(fact)} ({fact.why or 'range'}) can be exactly {at:g}, "
            f"where the gradient is infinite (NaN/INF in the backward pass)"
        )
        return _possible(site, reason, fact)
    if static_safe(fact, kind.region, dtype):
        reason = f"{label} {describe(fact)} ({fact.why})" if fact.why else f"{label} {describe(fact)}"
        return _safe(site, reason, fact)
    return _possible(site, _unsafe_reason(label, fact, kind.region.text, dtype), fact)


def _overflow_verdict(c: Candidate, ranges: RangeAnalysis) -> Verdict:
    """A float16 product or reduction: judged by its result's range (a sum of many small terms
    overflows), in float16 whatever the file's dtype."""
    site, region = c.site, KINDS[c.site.kind].region
    try:
        fact = ranges.fact(c.node)
    except RecursionError:
        fact = TOP
    if static_safe(fact, region, "float16"):
        return _safe(site, f"the result {describe(fact)} ({fact.why or 'range'}) stays within float16", fact)
    scale = _small_factor(c.node, ranges)
    if scale is not None:
        return _safe(site, f"a finite float16 value times a number {scale} stays within float16")
    where = f"it runs in float16 ({c.why})"
    return _possible(
        site, f"{where}, and its result ({describe(fact)}) can pass 65504, float16's largest value", fact
    )


def _small_factor(node: ast.AST, ranges: RangeAnalysis) -> str | None:
    """For a product with a number in [-1, 1] (``x * 0.5``, ``torch.mul(x, scale)``): that
    number's range in words. A float16 operand is finite when it arrives (else the overflow is upstream),
    so scaling it by at most 1 cannot pass 65504."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        factors = [node.left, node.right]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("mul", "multiply")
    ):
        factors = [*node.args, node.func.value]
    else:
        return None
    for f in factors:
        fact = ranges.fact(f)
        if fact.pytype == "num" and -1.0 <= fact.lo and fact.hi <= 1.0:
            return describe(fact)
    return None


def _safe(site: Site, reason: str, operand: Fact | None = None) -> Verdict:
    return Verdict(
        site, Status.SAFE, reason, message=f"{site.op} is safe: {reason}", operand_range=_range(operand)
    )


def _possible(site: Site, reason: str, operand: Fact | None = None) -> Verdict:
    title = KINDS[site.kind].title
    return Verdict(
        site,
        Status.POSSIBLE,
        reason,
        message=f"{site.op}: possible {title}; {reason}",
        operand_range=_range(operand),
    )


def _range(fact: Fact | None) -> OperandRange | None:
    if fact is None or not fact.known or fact.pytype == "bottom":
        return None
    lo = fact.lo if math.isfinite(fact.lo) else None
    hi = fact.hi if math.isfinite(fact.hi) else None
    return OperandRange(lo, hi, fact.nonzero)


def _operand_words(site: Site) -> str:
    """What to call the dangerous operand in a sentence (Site.operand keeps the catalogue's label)."""
    if site.kind == "div":
        return "divisor"
    if site.operand == "exponent":
        return "exponent"
    if site.operand in ("left", "right"):
        return f"the {site.operand} operand"
    if site.operand == "both":
        return "both operands"
    return "operand"


def _clamped(fact: Fact, eps: Fact, dtype: str) -> Fact:
    """The operand as an op with an eps argument sees it: clamped to [eps, 1 - eps]."""
    if eps.pytype == "none" or not eps.known or eps.lo <= 0:
        return fact
    top = round_up(1.0 - eps.lo, dtype)
    lo = min(max(fact.lo, eps.lo), top)
    hi = max(min(fact.hi, top), eps.lo)
    return Fact(lo, hi, True, fact.pytype, f"clamped by eps={eps.why or fmt(eps.lo)}")


def _unsafe_reason(label: str, fact: Fact, region: str, dtype: str) -> str:
    if not fact.known:
        return f"no range known for the {label}" + (f" ({fact.why})" if fact.why else "")
    return f"{label} {describe(fact)} ({fact.why or 'range'}), which reaches {region} in {dtype}"


def _pow_verdict(c: Candidate, base: Fact, ranges: RangeAnalysis, dtype: str) -> Verdict:
    site = c.site
    kind = KINDS["pow"]
    exp = ranges.fact(c.exponent) if c.exponent is not None else TOP
    exponent = exp.lo if exp.is_point else None
    if exponent is not None:
        test = pow_region_applies(exponent)
        pieces = [(base.lo, base.hi)]
        if base.nonzero and base.lo <= 0 <= base.hi:
            pieces = [
                p for p in ((base.lo, min(base.hi, -1e-45)), (max(base.lo, 1e-45), base.hi)) if p[0] <= p[1]
            ]
        if base.pytype == "bottom" or all(test(lo, hi) for lo, hi in pieces):
            reason = f"base {describe(base)} ({base.why or 'range'}) with exponent {exponent:g}"
            return _safe(site, reason, base)
        reason = _unsafe_reason("base", base, kind.region.text, dtype) + f" with exponent {exponent:g}"
    elif pow_range_safe(base, exp):
        reason = f"base {describe(base)} ({base.why or 'range'}) with exponent {describe(exp)} ({exp.why or 'range'})"
        return _safe(site, reason, base)
    elif c.exponent is not None and _counts(c.exponent, ranges):
        reason = f"exponent ({node_words(c.exponent, 'a count')}) counts a range() up from 0: a whole power of any base"
        return _safe(site, reason, base)
    else:
        reason = "exponent is not a known constant" + (
            f"; base {describe(base)}" if base.known else "; no range known for the base"
        )
    return _possible(site, reason, base)


def _counts(e: ast.AST, ranges: RangeAnalysis) -> bool:
    """Whether ``e`` is a whole number >= 0 on every path: a loop or comprehension variable over
    ``range(...)`` that cannot go below 0 (``[x ** i for i in range(1, n)]``), by every definition."""
    if not isinstance(e, ast.Name) or not ranges.flow.is_use(e):
        return False
    defs = ranges.flow.defs_reaching(e)
    return bool(defs) and all(
        d.how == "for"
        and not d.path
        and isinstance(d.value, ast.Call)
        and ranges.resolver.qualified_name(d.value.func) == "builtins.range"
        and _counts_up_from_zero(d.value, ranges)
        for d in defs
    )


def _counts_up_from_zero(call: ast.Call, ranges: RangeAnalysis) -> bool:
    """``range(n)``, ``range(a, n)`` with ``a >= 0``, ``range(a, n, s)`` with ``a >= 0 < s`` or a
    downward count that stops above -1: every value is >= 0."""
    if call.keywords or not 1 <= len(call.args) <= 3 or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    if len(call.args) == 1:
        return True
    start = ranges.fact(call.args[0])
    if len(call.args) == 2:
        return start.lo >= 0
    step = ranges.fact(call.args[2])
    if step.lo > 0:
        return start.lo >= 0
    return step.hi < 0 and ranges.fact(call.args[1]).lo >= -1


def _decode(path: str, data: bytes) -> str | Verdict:
    """The text of a source file, honouring a PEP 263 coding cookie, or an error verdict."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        return file_error(path, f"{path}:1: {e}; declare a valid encoding or save the file as UTF-8")
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as e:
        line = data[: getattr(e, "start", 0)].count(b"\n") + 1
        return file_error(
            path,
            f"{path}:{line}: cannot decode as {encoding} ({e.__class__.__name__}); "
            "save the file as UTF-8 or declare its encoding with a coding cookie",
            line,
        )
    return text


def analyze_file(path: str) -> list[Verdict]:
    """Read and analyse one file; unreadable or non-source files give one error verdict."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            return [
                file_error(
                    path,
                    f"{path}:1: file is {size} bytes, over the static pass' limit of "
                    f"{MAX_FILE_BYTES}; exclude it or split it",
                )
            ]
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        return [
            file_error(
                path, f"{path}:1: cannot read the file ({e.strerror or e}); check the path and permissions"
            )
        ]
    if not data.strip():
        return []
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        return [
            file_error(
                path, f"{path}:{line}: binary file (NUL byte); only Python source can be analysed", line
            )
        ]
    text = _decode(path, data)
    if isinstance(text, Verdict):
        return [text]
    return analyze_source(path, text)
