"""The ``Fact`` lattice of the range analysis: an interval + sign + Python type, its join,
outward rounding to a dtype, interval arithmetic helpers, and the words a reason uses for a fact.

Pure values and functions: no tree, no dataflow (``ranges.py`` evaluates expressions to facts).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace

from grist_lsp.analyzer.catalogue import Region, dtype_limits

INF = math.inf
# How far F.normalize / F.cosine_similarity outputs stray past +-1 by rounding
# (measured: cosine_similarity of near-parallel float32 vectors reaches 1 + 3.6e-7).
UNIT_SLOP = 1e-6

# machine epsilon (torch.finfo(dtype).eps), distinct from the catalogue's fix eps
MACHINE_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
_SMALLEST_SUBNORMAL = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 5e-324}


@dataclass(frozen=True)
class Fact:
    lo: float = -INF
    hi: float = INF
    nonzero: bool = False
    pytype: str = "unknown"  # num | str | tensor | object | module | none | unknown | bottom
    why: str = ""

    @property
    def known(self) -> bool:
        return self.lo != -INF or self.hi != INF or self.nonzero

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi and self.pytype != "bottom"

    def with_type(self, pytype: str) -> Fact:
        return replace(self, pytype=pytype)


TOP = Fact()
CYCLE = Fact(pytype="cycle")
BOTTOM = Fact(INF, -INF, True, "bottom", "unreachable")


def join(facts: list[Fact], why: str | None = None) -> Fact:
    live = [f for f in facts if f.pytype != "bottom"]
    if not live:
        return BOTTOM if facts else TOP
    types = {f.pytype for f in live if f.pytype != "cycle"} or {"unknown"}
    whys = []
    for f in live:
        if f.why and f.why not in whys:
            whys.append(f.why)
    return Fact(
        min(f.lo for f in live),
        max(f.hi for f in live),
        all(f.nonzero for f in live),
        types.pop() if len(types) == 1 else "unknown",
        why if why is not None else (whys[0] if len(whys) == 1 else " or ".join(whys[:3])),
    )


# --- rounding to the analysed dtype ------------------------------------------------

_FORMATS = {"float16": ("<e", "<H", 16), "float32": ("<f", "<I", 32)}


def _ordinal(v: float, dtype: str) -> int:
    """Floats of a dtype as consecutive integers (negative floats negative)."""
    ffmt, ifmt, nbits = _FORMATS[dtype]
    bits = struct.unpack(ifmt, struct.pack(ffmt, v))[0]
    sign = 1 << (nbits - 1)
    return -(bits & (sign - 1)) if bits & sign else bits


def _from_ordinal(o: int, dtype: str) -> float:
    ffmt, ifmt, nbits = _FORMATS[dtype]
    bits = ((-o) | (1 << (nbits - 1))) if o < 0 else o
    return struct.unpack(ffmt, struct.pack(ifmt, bits))[0]


def _nearest(v: float, dtype: str) -> float:
    try:
        return struct.unpack(_FORMATS[dtype][0], struct.pack(_FORMATS[dtype][0], v))[0]
    except OverflowError:
        return math.copysign(INF, v)


def round_down(v: float, dtype: str) -> float:
    """The largest value of ``dtype`` <= v (what a computed lower bound can really be)."""
    if math.isnan(v):
        return -INF
    if math.isinf(v) or dtype == "float64":
        return v
    if dtype == "bfloat16":
        o = _ordinal(round_down(v, "float32"), "float32")
        r = (
            _from_ordinal((o // 65536) * 65536, "float32")
            if o >= 0
            else -_from_ordinal(-((o // 65536) * 65536), "float32")
        )
        return r
    r = _nearest(v, dtype)
    if r > v:
        r = -INF if math.isinf(r) and r > 0 and v < 0 else _from_ordinal(_ordinal(r, dtype) - 1, dtype)
    if math.isinf(r) and r > 0:  # v above the dtype's max rounds to max, then overflows in arithmetic
        return _from_ordinal(_ordinal(dtype_limits(dtype).max, dtype), dtype)
    return r


def round_up(v: float, dtype: str) -> float:
    if math.isnan(v):
        return INF
    return -round_down(-v, dtype)


# --- arithmetic ----------------------------------------------------------------------


def safe_call(fn: Callable[..., float], *args: float | str, default: float = math.nan) -> float:
    try:
        return float(fn(*args))
    except (OverflowError, ValueError, ZeroDivisionError):
        return default


def corners(values: list[float]) -> tuple[float, float]:
    vals = [0.0 if math.isnan(v) else v for v in values]
    return min(vals), max(vals)


def square(f: Fact) -> tuple[float, float]:
    lo, hi = f.lo, f.hi
    a, b = safe_call(lambda x: x * x, lo, default=INF), safe_call(lambda x: x * x, hi, default=INF)
    if lo <= 0.0 <= hi:
        return 0.0, max(a, b)
    return min(a, b), max(a, b)


def pow_interval(base: Fact, c: float) -> tuple[float, float] | None:
    """Range of base ** c for a constant exponent; None when unknown."""
    if c == 0:
        return 1.0, 1.0
    p = lambda x: safe_call(lambda v: math.pow(v, c), x, default=INF)  # noqa: E731
    if float(c).is_integer():
        n = int(c)
        if n > 0 and n % 2 == 0:
            lo, hi = square(base)
            return (p(math.sqrt(lo)) if lo > 0 else 0.0), (
                INF if hi == INF else p(max(abs(base.lo), abs(base.hi)))
            )
        if n > 0:
            return p(base.lo) if base.lo != -INF else -INF, p(base.hi) if base.hi != INF else INF
        # negative integer power: 1 / x**|n|
        if base.lo > 0:
            return p(base.hi) if base.hi != INF else 0.0, p(base.lo)
        if base.hi < 0 and n % 2 == 0:
            return p(base.lo) if base.lo != -INF else 0.0, p(base.hi)
        if base.hi < 0:
            return p(base.hi), p(base.lo) if base.lo != -INF else 0.0
        return (0.0, INF) if n % 2 == 0 else None
    lo = max(base.lo, 0.0)
    if base.hi < 0:
        return None
    if c > 0:
        return p(lo), (INF if base.hi == INF else p(base.hi))
    if lo > 0:
        return (0.0 if base.hi == INF else p(base.hi)), p(lo)
    return 0.0, INF


def pow_range_safe(base: Fact, exponent: Fact) -> bool:
    """base ** e with e anywhere in a known range (not one constant): safe when the base is
    positive (any exponent), or non-negative with a non-negative exponent (0 ** e is 0 or 1).
    A negative base needs an integer exponent, which a range cannot say."""
    if base.pytype == "bottom" or exponent.pytype == "bottom":
        return True
    return base.lo > 0 or (base.lo >= 0 and exponent.lo >= 0)


def shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt(v: float) -> str:
    if v == INF:
        return "inf"
    if v == -INF:
        return "-inf"
    return f"{v + 0.0:.7g}"  # + 0.0 turns -0.0 into 0.0


def describe(f: Fact) -> str:
    """``>= 1e-08``, ``in [0, 1]``, ``!= 0`` ... for verdict reasons."""
    if f.pytype == "bottom":
        return "unreachable"
    parts = []
    if f.lo == -INF and f.hi == INF:
        parts.append("unbounded")
    elif f.hi == INF:
        parts.append(f">= {fmt(f.lo)}")
    elif f.lo == -INF:
        parts.append(f"<= {fmt(f.hi)}")
    elif f.lo == f.hi or abs(f.hi - f.lo) <= 1e-6 * abs(f.lo):  # a constant, widened by rounding
        parts.append(f"== {fmt((f.lo + f.hi) / 2)}")
    else:
        parts.append(f"in [{fmt(f.lo)}, {fmt(f.hi)}]")
    if f.nonzero and f.lo <= 0 <= f.hi:
        parts.append("and != 0")
    return " ".join(parts)


def static_safe(f: Fact, region: Region, dtype: str) -> bool:
    """Region.static_safe over a fact, splitting a nonzero interval around 0."""
    if f.pytype == "bottom":
        return True
    if f.nonzero and f.lo <= 0.0 <= f.hi:
        tiny = _SMALLEST_SUBNORMAL.get(dtype, 5e-324)
        pieces = []
        if f.lo < 0:
            pieces.append((f.lo, min(f.hi, -tiny)))
        if f.hi > 0:
            pieces.append((max(f.lo, tiny), f.hi))
        return bool(pieces) and all(region.static_safe(lo, hi, dtype) for lo, hi in pieces)
    return region.static_safe(f.lo, f.hi, dtype)


def wrap(why: str) -> str:
    """Parenthesise a compound description inside a larger one."""
    return f"({why})" if " " in why and not (why.startswith("(") and why.endswith(")")) else why


def nan_to(v: float, default: float) -> float:
    return default if math.isnan(v) else v
