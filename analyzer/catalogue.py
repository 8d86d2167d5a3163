"""The op catalogue: every unsafe operation we know, as one table.

A row (``Op``) names an entry point (function, Tensor method, operator dunder,
in-place form), the *kind* of danger, and which argument carries it. A kind
(``Kind``) owns the rule code, the words we show people, and the invalid region
(``Region``), which is dtype-aware and answers the two questions the rest of the
pipeline asks:

* static: does an operand range ``[lo, hi]`` stay out of the region?
  (``Region.static_safe``)
* dynamic: how far is a concrete operand tensor from the region?
  (``Region.distance``: a scalar the engine minimises; <= 0 means inside.)

Nothing outside this module branches on op names; add a row here instead.
This module imports torch only inside ``distance`` so the static pass stays
torch-free and fast.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

# --- dtype limits ------------------------------------------------------------


@dataclass(frozen=True)
class DtypeLimits:
    name: str
    max: float  # largest finite value
    tiny: float  # smallest positive normal
    eps: float  # the eps our fixes use for this dtype (clamp floors, guarded divisors)
    # The diagonal jitter our linear-algebra fixes add (A + jitter * I). Not ``eps``: 1e-8 is lost
    # when added to a float32 diagonal of order 1 (1 + 1e-8 == 1), while factorization round-off
    # is about n * machine epsilon * |A|, so the jitter sits a few hundred machine epsilons up.
    jitter: float = 1e-5

    @property
    def ln_max(self) -> float:
        """exp(x) overflows to inf for x above this."""
        return math.log(self.max)


DTYPES: dict[str, DtypeLimits] = {
    "float16": DtypeLimits("float16", 65504.0, 6.103515625e-05, 1e-4, 1e-1),
    "bfloat16": DtypeLimits("bfloat16", 3.3895313892515355e38, 1.1754943508222875e-38, 1e-3, 1e-1),
    "float32": DtypeLimits("float32", 3.4028234663852886e38, 1.1754943508222875e-38, 1e-8, 1e-5),
    "float64": DtypeLimits("float64", 1.7976931348623157e308, 2.2250738585072014e-308, 1e-12, 1e-10),
}
DEFAULT_DTYPE = "float32"


def dtype_limits(dtype: str | None) -> DtypeLimits:
    """Limits for a dtype name (``torch.float16``, ``half``, ``float32`` ...); float32 when unknown."""
    name = (dtype or DEFAULT_DTYPE).replace("torch.", "")
    name = {"half": "float16", "float": "float32", "double": "float64"}.get(name, name)
    return DTYPES.get(name, DTYPES[DEFAULT_DTYPE])


# --- invalid regions ---------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """Where an operand makes the op produce NaN/INF.

    ``text`` describes it for people (``x <= 0``). ``static_safe`` decides from a
    closed interval of the operand; ``distance`` is the engine's objective. Both
    come from the small family of shapes below rather than ad-hoc code per op.
    """

    text: str
    # Invalid when x < lo (or <= lo if lo_inclusive), or x > hi (or >= hi).
    lo: float | None = None
    lo_inclusive: bool = False
    hi: float | None = None
    hi_inclusive: bool = False
    zero: bool = False  # invalid at exactly 0 (division)
    hi_is_ln_max: bool = False  # hi is ln(max of dtype): overflow of exp-like ops
    nonpositive_integers: bool = False  # poles of lgamma/digamma
    shape: str | None = None  # "single-element" / "empty": decided by shape, not value
    backward_at: float | None = None  # the gradient is INF/NaN here (sqrt at 0)
    # Infinities the program puts in operands on purpose (-inf in masked attention scores; +-inf
    # in a masked sum or product), not an upstream failure: the oracle accepts operands holding
    # these and blames the op only for a NaN output.
    inf_operands: tuple[str, ...] = ()
    # A property of the operand as a matrix (its last two dimensions), not of its entries:
    # "det <= 0" (logdet), "not positive definite" (cholesky), "singular" (inverse, solve) or
    # "repeated spectrum" (the vectors of eigh/svd). Entry ranges cannot decide it, and the
    # engine's objective is spectral (``distance``).
    matrix: str | None = None
    # The op may fail by raising torch.linalg.LinAlgError rather than returning NaN/INF (cholesky
    # of a matrix that is not positive definite; inv of an exactly singular one, which otherwise
    # returns inf/NaN): the oracle counts that error, raised by the op at the site from finite
    # operands, as a failure, beside a non-finite output.
    raises: bool = False
    # Overflow of a product or reduction: invalid where the op's *result* is beyond the largest
    # finite value of the operands' dtype (65504 in float16). No operand range says it (a sum
    # of many small terms overflows), so the static pass judges the result's range, and the
    # engine's objective is measured on the result computed in float32 from the same operands.
    beyond_max: bool = False
    # The op's value is finite everywhere; its derivative is not (the vectors of eigh/svd at a
    # repeated eigenvalue or singular value): the oracle is the op's own backward pass, and only
    # where the program differentiates something behind the operand.
    gradient: bool = False

    @property
    def nests(self) -> bool:
        """Its ops nest in each other (``(a + b) * c``, ``(x * 2).sum()``): a site matches a call at
        its own position only, or a site-less inner op would stand for the site around it."""
        return self.beyond_max or "inf" in self.inf_operands

    @property
    def exact_root(self) -> bool:
        """The region is reached only on an exact root of the objective (a zero divisor, log(0),
        an exactly singular matrix), which signed steps circle around: Newton steps apply."""
        return (
            self.zero
            or self.lo_inclusive
            or self.hi_inclusive
            or self.nonpositive_integers
            or self.backward_at is not None
            or self.matrix in ("singular", "repeated spectrum")
        )

    def upper(self, dtype: str | None = None) -> float | None:
        if self.hi_is_ln_max:
            return dtype_limits(dtype).ln_max
        return self.hi

    def static_safe(self, lo: float, hi: float, dtype: str | None = None) -> bool:
        """True when every value of the closed interval [lo, hi] is valid."""
        if self.shape is not None or self.matrix is not None:
            return False  # value ranges say nothing about shapes or spectra
        if self.zero and lo <= 0.0 <= hi:
            return False
        if self.lo is not None and (lo < self.lo or (self.lo_inclusive and lo <= self.lo)):
            return False
        upper = self.upper(dtype)
        if upper is not None and (hi > upper or (self.hi_inclusive and hi >= upper)):
            return False
        if self.nonpositive_integers and lo <= 0.0:
            return False
        if self.beyond_max and max(-lo, hi) > dtype_limits(dtype).max:
            return False
        return True

    def distance(self, x: Any, dtype: str | None = None, hermitian: bool = False) -> Any:
        """Scalar torch tensor: how far the operand ``x`` is from the region (<= 0: inside).

        Differentiable wherever the region is reached by moving values; for shape
        regions it is constant and the engine falls back to shape search. ``hermitian``: the
        op reads the operand as a Hermitian matrix (``Op.hermitian``: eigh).
        """
        import torch

        x = x.detach() if not x.requires_grad else x
        x = x.float() if not torch.is_floating_point(x) else x
        if x.numel() == 0:
            return x.new_zeros(())
        if self.shape is not None:
            return x.new_ones(())
        if self.matrix is not None:
            return _matrix_distance(self.matrix, x, hermitian)
        parts = []
        if self.zero:
            parts.append(x.abs().min())
        if self.lo is not None:
            parts.append(x.min() - self.lo)
        upper = self.upper(dtype or str(x.dtype))
        if upper is not None:
            parts.append(upper - x.max())
        if self.beyond_max:
            parts.append(dtype_limits(dtype or str(x.dtype)).max - x.abs().max())
        if self.nonpositive_integers:
            # distance to the nearest pole among 0, -1, -2, ...
            pole = torch.clamp(torch.round(x), max=0.0).detach()
            parts.append((x - pole).abs().min())
        return torch.stack(parts).min()


def _matrix_distance(which: str, x: Any, hermitian: bool = False) -> Any:
    """The engine's objective for a matrix region, over a batch of matrices (the worst one); square
    ones, but for the singular vectors of svd.

    * ``"det <= 0"``: sign(det) times the smallest singular value. It is continuous (the sign
      flips only where the smallest singular value is 0), its gradient is the smallest singular
      pair's, which is defined even where larger singular values repeat (unlike ``svd``'s
      vectors), and it is <= 0 exactly where logdet gives -inf or NaN.
    * ``"not positive definite"``: the smallest eigenvalue of the lower triangle's Hermitian
      matrix, the triangle cholesky reads (``eigvalsh`` reads the same one); <= 0 is where the
      factorization fails.
    * ``"singular"``: the smallest singular value, >= 0 and 0 exactly where inv/solve fail. An
      exact root, so the search's Newton steps apply (``Region.exact_root``); in float32 a
      matrix only near singular gives huge but finite values, which are not the failure.
    * ``"repeated spectrum"``: the smallest gap between adjacent eigenvalues (``hermitian``: of
      the lower triangle's Hermitian matrix, what eigh reads) or singular values; the vectors'
      derivative divides by these gaps. A non-square matrix's singular vectors also divide by
      the singular values themselves, so its smallest one counts too. One value: 1 (no gap).
    """
    import torch

    if x.dim() < 2 or (x.shape[-1] != x.shape[-2] and (which != "repeated spectrum" or hermitian)):
        return x.new_ones(())  # not a (square) matrix: the op itself refuses it, no numerical bug
    x = x.double() if x.dtype in (torch.float16, torch.bfloat16) else x
    if which == "det <= 0":
        smallest = torch.linalg.svdvals(x)[..., -1]
        sign = torch.linalg.det(x).detach().sign()
        return (sign * smallest).min()
    if which == "singular":
        return torch.linalg.svdvals(x)[..., -1].min()
    if which == "repeated spectrum":
        return _smallest_gap(x, hermitian)
    return torch.linalg.eigvalsh(x)[..., 0].min()


def _smallest_gap(x: Any, hermitian: bool) -> Any:
    """See ``_matrix_distance``: "repeated spectrum"."""
    import torch

    values = torch.linalg.eigvalsh(x) if hermitian else torch.linalg.svdvals(x)
    parts = [(values[..., 1:] - values[..., :-1]).abs().flatten()]
    if not hermitian and x.shape[-1] != x.shape[-2]:
        parts.append(values[..., -1].flatten())
    gaps = torch.cat(parts)
    return gaps.min() if gaps.numel() else x.new_ones(())


# --- kinds -------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    code: str  # rule code, GRIST###; documented in README
    title: str  # what goes wrong, for people
    region: Region
    fix_hint: str  # the idiomatic rewrite, in words


KINDS: dict[str, Kind] = {
    k.name: k
    for k in [
        Kind(
            "log",
            "GRIST101",
            "logarithm of a non-positive value",
            Region("x <= 0", lo=0.0, lo_inclusive=True),
            "clamp the operand: log(x.clamp_min(eps)), or use log_softmax / logsigmoid",
        ),
        Kind(
            "log1p",
            "GRIST102",
            "log1p of a value <= -1",
            Region("x <= -1", lo=-1.0, lo_inclusive=True),
            "clamp the operand above -1",
        ),
        Kind(
            "sqrt",
            "GRIST103",
            "square root of a negative value (and an infinite gradient at 0)",
            Region("x < 0", lo=0.0, backward_at=0.0),
            "sqrt(x.clamp_min(eps))",
        ),
        Kind(
            "rsqrt",
            "GRIST104",
            "reciprocal square root of a non-positive value",
            Region("x <= 0", lo=0.0, lo_inclusive=True),
            "rsqrt(x.clamp_min(eps))",
        ),
        Kind(
            "div",
            "GRIST105",
            "division by zero",
            Region("divisor == 0", zero=True),
            "guard the divisor: b.clamp_min(eps) or b + eps for non-negative b",
        ),
        Kind(
            "exp",
            "GRIST106",
            "exponential overflow",
            Region("x > ln(max of dtype)", hi_is_ln_max=True),
            "bound the operand, or use logsumexp / softmax",
        ),
        Kind(
            "pow",
            "GRIST107",
            "power of a negative base with a fractional exponent, or of zero with a negative one",
            Region("base < 0 (fractional exponent) or base == 0 (negative exponent)", lo=0.0, zero=True),
            "clamp the base: x.clamp_min(eps) ** p",
        ),
        Kind(
            "acos",
            "GRIST108",
            "acos/asin outside [-1, 1]",
            Region("|x| > 1", lo=-1.0, hi=1.0),
            "acos(x.clamp(-1 + eps, 1 - eps))",
        ),
        Kind(
            "atanh",
            "GRIST109",
            "atanh at or beyond +-1",
            Region("|x| >= 1", lo=-1.0, lo_inclusive=True, hi=1.0, hi_inclusive=True),
            "atanh(x.clamp(-1 + eps, 1 - eps))",
        ),
        Kind("acosh", "GRIST110", "acosh below 1", Region("x < 1", lo=1.0), "acosh(x.clamp_min(1))"),
        Kind(
            "lgamma",
            "GRIST111",
            "lgamma/digamma at a pole (0, -1, -2, ...)",
            Region("x in {0, -1, -2, ...}", nonpositive_integers=True),
            "keep the operand positive: x.clamp_min(eps)",
        ),
        Kind(
            "var",
            "GRIST112",
            "variance/standard deviation of a single element (correction 1)",
            Region("one element along the reduced dimensions", shape="single-element"),
            "pass correction=0 (unbiased=False), or guard the element count",
        ),
        Kind(
            "mean",
            "GRIST113",
            "mean over an empty dimension",
            Region("zero elements along the reduced dimensions", shape="empty"),
            "guard against an empty selection",
        ),
        Kind(
            "logit",
            "GRIST114",
            "logit at or outside 0 and 1",
            Region("x <= 0 or x >= 1", lo=0.0, lo_inclusive=True, hi=1.0, hi_inclusive=True),
            "pass eps=: torch.logit(x, eps=1e-6)",
        ),
        Kind(
            "softmax",
            "GRIST115",
            "softmax of a row that is entirely -inf (fully masked)",
            Region("a row that is entirely -inf", shape="all -inf row", inf_operands=("-inf",)),
            "mask with torch.finfo(dtype).min instead of -inf, or keep one unmasked entry per row",
        ),
        Kind(
            "logdet",
            "GRIST116",
            "log-determinant of a singular matrix or one with a negative determinant",
            Region("det(A) <= 0", matrix="det <= 0"),
            "add a jitter to the diagonal of a covariance (A + eps * I), or use torch.linalg.slogdet "
            "for log|det A|",
        ),
        Kind(
            "cholesky",
            "GRIST117",
            "Cholesky factorization of a matrix that is not positive definite (raises LinAlgError)",
            Region("smallest eigenvalue <= 0", matrix="not positive definite", raises=True),
            "add a jitter to the diagonal (A + eps * I), or use torch.linalg.cholesky_ex and check info",
        ),
        Kind(
            "inf_arith",
            "GRIST118",
            "NaN from arithmetic on an infinity the program put there (0 * inf, inf - inf)",
            Region(
                "0 * inf or inf - inf",
                shape="intended infinity",
                inf_operands=("-inf", "inf"),
            ),
            "keep the infinity out of the arithmetic: a finite fill (torch.finfo(dtype).min), "
            "torch.nan_to_num on the operand, torch.special.xlogy / entr for p * log p",
        ),
        Kind(
            "overflow",
            "GRIST119",
            "float16 overflow of a product or reduction (a result beyond 65504 is inf)",
            Region("|result| > max of float16 (65504)", beyond_max=True),
            "upcast before the product or reduction: x.float().pow(2).sum(), a.float() @ b.float(), "
            "x.sum(dtype=torch.float32); or scale the operands down first",
        ),
        Kind(
            "inverse",
            "GRIST120",
            "inverse or linear solve of a singular matrix (raises LinAlgError, or gives inf/NaN)",
            Region("smallest singular value == 0", matrix="singular", raises=True),
            "add a jitter to the diagonal (A + eps * I) of a covariance, kernel or normal matrix, or use "
            "torch.linalg.pinv (the least-squares solution)",
        ),
        Kind(
            "spectral",
            "GRIST121",
            "gradient of eigenvectors or singular vectors at a repeated eigenvalue or singular value "
            "(NaN/INF in the backward pass)",
            Region("two equal eigenvalues or singular values", matrix="repeated spectrum", gradient=True),
            "break the tie: a tiny distinct diagonal, A + eps * diag(arange(n)) (the vectors of a "
            "near tie are then decided by it, and their gradient can reach 1/eps), or detach the "
            "operand (no gradient through the decomposition at all)",
        ),
    ]
}

ERROR_CODE = "GRIST000"  # a file that could not be analysed or run


# --- ops -----------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One entry point of an unsafe op.

    ``name``: canonical name (``torch.log``, ``torch.Tensor.log_``,
    ``torch.Tensor.__truediv__``). ``operand``: how the dangerous operand is
    passed: a positional index into the call's arguments (for methods and
    dunders, index 0 is the tensor itself) and a keyword name. ``safe_when``:
    keyword arguments whose given literal value makes the op safe
    (``correction=0``). ``aux``: index/keyword of a second argument the region
    depends on (the exponent of ``pow``).
    """

    name: str
    kind: str
    operand_index: int = 0
    operand_keyword: str = "input"
    safe_when: tuple[tuple[str, Any], ...] = ()
    aux_index: int | None = None
    aux_keyword: str | None = None
    # An argument that, given a value eps, makes the op clamp its operand to
    # [eps, 1 - eps] first (torch.logit's eps). None: the op has no such argument.
    clamp_index: int | None = None
    clamp_keyword: str | None = None
    # inf_arith sums ("opposite") and differences ("same"): NaN only when both operands hold an
    # infinity, of opposite signs for a sum (inf + -inf), of the same sign for a difference;
    # an additive -inf mask on finite scores is the intended -inf, not NaN.
    inf_pair: str = ""
    # Decompositions (kind "spectral"): the outputs whose derivative fails at a repeated
    # eigenvalue or singular value, by position and by field name (``eigh(A)[1]``,
    # ``eigh(A).eigenvectors``); a call whose program reads none of them is no site. ``hermitian``:
    # the op reads its operand as a Hermitian matrix (its lower triangle).
    vectors: tuple[tuple[int, str], ...] = ()
    hermitian: bool = False

    @property
    def operand_label(self) -> str:
        return self.operand_keyword


class _OpArgs(TypedDict, total=False):
    """The optional fields of an ``Op`` row, so shared argument sets (``_DIVISOR``, ``_POW``) and
    ``_forms``' keywords are checked against ``Op`` field by field."""

    operand_index: int
    operand_keyword: str
    safe_when: tuple[tuple[str, Any], ...]
    aux_index: int | None
    aux_keyword: str | None
    clamp_index: int | None
    clamp_keyword: str | None
    inf_pair: str
    vectors: tuple[tuple[int, str], ...]
    hermitian: bool


def _forms(
    kind: str,
    base: str,
    *,
    function: bool = True,
    method: bool = True,
    inplace: bool = True,
    special: bool = False,
    math_mod: bool = False,
    **kw: Unpack[_OpArgs],
) -> list[Op]:
    """The usual spellings of one elementwise op: torch.f, Tensor.f, Tensor.f_, torch.special.f, math.f."""
    rows = []
    if function:
        rows.append(Op(f"torch.{base}", kind, **kw))
    if method:
        rows.append(Op(f"torch.Tensor.{base}", kind, **kw))
    if inplace:
        rows.append(Op(f"torch.Tensor.{base}_", kind, **kw))
    if special:
        rows.append(Op(f"torch.special.{base}", kind, **kw))
    if math_mod:
        rows.append(Op(f"math.{base}", kind, operand_keyword="x"))
    return rows


_DIVISOR: _OpArgs = {"operand_index": 1, "operand_keyword": "other"}
_VAR_SAFE = (("correction", 0), ("unbiased", False))
_POW: _OpArgs = {"operand_index": 0, "operand_keyword": "input", "aux_index": 1, "aux_keyword": "exponent"}

OPS: list[Op] = [
    # logarithms
    *_forms("log", "log", math_mod=True),
    *_forms("log", "log2", math_mod=True),
    *_forms("log", "log10", math_mod=True),
    *_forms("log1p", "log1p", special=True, math_mod=True),
    Op("numpy.log", "log", operand_keyword="x"),
    # roots
    *_forms("sqrt", "sqrt", math_mod=True),
    *_forms("rsqrt", "rsqrt"),
    Op("numpy.sqrt", "sqrt", operand_keyword="x"),
    # division and friends (the divisor is the dangerous operand)
    *_forms("div", "div", **_DIVISOR),
    *_forms("div", "divide", **_DIVISOR),
    *_forms("div", "true_divide", **_DIVISOR),
    *_forms("div", "floor_divide", **_DIVISOR),
    *_forms("div", "fmod", **_DIVISOR),
    *_forms("div", "remainder", **_DIVISOR),
    *_forms("div", "reciprocal", special=False),
    Op("torch.Tensor.__truediv__", "div", **_DIVISOR),
    Op("torch.Tensor.__itruediv__", "div", **_DIVISOR),
    Op("torch.Tensor.__floordiv__", "div", **_DIVISOR),
    Op("torch.Tensor.__ifloordiv__", "div", **_DIVISOR),
    Op("torch.Tensor.__mod__", "div", **_DIVISOR),
    Op("torch.Tensor.__imod__", "div", **_DIVISOR),
    # `2 / x`: the tensor (index 0 of the reflected dunder) is the divisor
    Op("torch.Tensor.__rtruediv__", "div", operand_index=0, operand_keyword="other"),
    Op("torch.Tensor.__rdiv__", "div", operand_index=0, operand_keyword="other"),
    Op("torch.Tensor.__rfloordiv__", "div", operand_index=0, operand_keyword="other"),
    Op("torch.Tensor.__rmod__", "div", operand_index=0, operand_keyword="other"),
    # exponentials
    *_forms("exp", "exp", special=False, math_mod=True),
    *_forms("exp", "expm1", special=True, math_mod=True),
    *_forms("exp", "exp2", special=True),
    *_forms("exp", "cosh", math_mod=True),
    *_forms("exp", "sinh", math_mod=True),
    Op("numpy.exp", "exp", operand_keyword="x"),
    # powers
    *_forms("pow", "pow", **_POW),
    *_forms("pow", "float_power", **_POW),
    Op("torch.Tensor.__pow__", "pow", **_POW),
    Op("torch.Tensor.__ipow__", "pow", **_POW),
    # `2 ** x` overflows like exp; the tensor is the exponent
    Op("torch.Tensor.__rpow__", "exp", operand_index=0, operand_keyword="exponent"),
    # inverse trigonometric and hyperbolic
    *_forms("acos", "acos", math_mod=True),
    *_forms("acos", "asin", math_mod=True),
    *_forms("acos", "arccos"),
    *_forms("acos", "arcsin"),
    *_forms("atanh", "atanh", math_mod=True),
    *_forms("atanh", "arctanh"),
    *_forms("acosh", "acosh", math_mod=True),
    *_forms("acosh", "arccosh"),
    # gamma family
    *_forms("lgamma", "lgamma", math_mod=True),
    *_forms("lgamma", "digamma", special=True),
    Op("torch.special.gammaln", "lgamma"),
    Op("torch.special.psi", "lgamma"),
    Op("torch.polygamma", "lgamma", operand_index=1, operand_keyword="input"),
    Op("torch.special.polygamma", "lgamma", operand_index=1, operand_keyword="input"),
    # logit
    *_forms("logit", "logit", special=True, clamp_index=1, clamp_keyword="eps"),
    # reductions decided by shape
    *_forms("var", "var", inplace=False, safe_when=_VAR_SAFE),
    *_forms("var", "std", inplace=False, safe_when=_VAR_SAFE),
    Op("torch.var_mean", "var", safe_when=_VAR_SAFE),
    Op("torch.std_mean", "var", safe_when=_VAR_SAFE),
    *_forms("mean", "mean", inplace=False),
    *_forms("mean", "nanmean", inplace=False),
    # softmax over masked scores (a site only when the operand may hold -inf: see sites.py)
    *_forms("softmax", "softmax", inplace=False, special=True),
    *_forms("softmax", "log_softmax", inplace=False, special=True),
    Op("torch.nn.functional.softmax", "softmax"),
    Op("torch.nn.functional.log_softmax", "softmax"),
    # linear algebra: the operand is the whole (batch of) matrix
    Op("torch.logdet", "logdet"),
    Op("torch.Tensor.logdet", "logdet"),
    Op("torch.linalg.cholesky", "cholesky", operand_keyword="A"),
    Op("torch.cholesky", "cholesky"),
    Op("torch.Tensor.cholesky", "cholesky"),
    # inverse and solve: the matrix A is the operand. inv_ex/solve_ex are not rows: like
    # cholesky_ex they report a singular matrix in ``info`` instead of raising, for a program that
    # checks it.
    Op("torch.inverse", "inverse"),
    Op("torch.Tensor.inverse", "inverse"),
    Op("torch.linalg.inv", "inverse", operand_keyword="A"),
    Op("torch.linalg.solve", "inverse", operand_keyword="A"),
    # eigen and singular vectors (their gradient divides by eigenvalue / singular value gaps).
    # eigvalsh, svdvals and eigh/svd whose vectors nobody reads are no sites (analyzer/spectral.py).
    Op("torch.linalg.eigh", "spectral", operand_keyword="A", vectors=((1, "eigenvectors"),), hermitian=True),
    Op("torch.linalg.svd", "spectral", operand_keyword="A", vectors=((0, "U"), (2, "Vh"))),
    *_forms("spectral", "svd", inplace=False, vectors=((0, "U"), (2, "V"))),
    # products, sums and contractions of a tensor that holds an intended +-inf (a site only when
    # such an operand may reach them: see sites.py); either operand may be the infinite one. A
    # reduction (sum) is NaN only from both infinities at once, which an earlier product or
    # difference made: that one is the site.
    *_forms("inf_arith", "mul"),
    *_forms("inf_arith", "multiply"),
    *_forms("inf_arith", "add", inf_pair="opposite"),
    *_forms("inf_arith", "sub", inf_pair="same"),
    *_forms("inf_arith", "subtract", inf_pair="same"),
    Op("torch.Tensor.__mul__", "inf_arith"),
    Op("torch.Tensor.__rmul__", "inf_arith"),
    Op("torch.Tensor.__imul__", "inf_arith"),
    Op("torch.Tensor.__add__", "inf_arith", inf_pair="opposite"),
    Op("torch.Tensor.__radd__", "inf_arith", inf_pair="opposite"),
    Op("torch.Tensor.__iadd__", "inf_arith", inf_pair="opposite"),
    Op("torch.Tensor.__sub__", "inf_arith", inf_pair="same"),
    Op("torch.Tensor.__rsub__", "inf_arith", inf_pair="same"),
    Op("torch.Tensor.__isub__", "inf_arith", inf_pair="same"),
    *_forms("inf_arith", "matmul", inplace=False),
    Op("torch.Tensor.__matmul__", "inf_arith"),
    Op("torch.Tensor.__rmatmul__", "inf_arith"),
    Op("torch.mm", "inf_arith"),
    Op("torch.bmm", "inf_arith"),
    Op("torch.einsum", "inf_arith", operand_index=1, operand_keyword="operands"),
    Op("torch.functional.einsum", "inf_arith", operand_index=1, operand_keyword="operands"),
    # float16 products and reductions whose result may pass 65504 (a site only when an operand
    # may be float16: see analyzer/precision.py). Not mean (its result is bounded by the largest
    # entry, and torch accumulates in float32) and not std (a square root of the variance).
    *_forms("overflow", "mul"),
    *_forms("overflow", "multiply"),
    Op("torch.Tensor.__mul__", "overflow"),
    Op("torch.Tensor.__rmul__", "overflow"),
    Op("torch.Tensor.__imul__", "overflow"),
    *_forms("overflow", "square"),
    *_forms("overflow", "pow"),  # any exponent: x ** 2 is where float16 overflows first
    Op("torch.Tensor.__pow__", "overflow"),
    Op("torch.Tensor.__ipow__", "overflow"),
    *_forms("overflow", "matmul", inplace=False),
    Op("torch.Tensor.__matmul__", "overflow"),
    Op("torch.Tensor.__rmatmul__", "overflow"),
    *_forms("overflow", "mm", inplace=False),
    *_forms("overflow", "bmm", inplace=False),
    *_forms("overflow", "dot", inplace=False),
    Op("torch.einsum", "overflow", operand_index=1, operand_keyword="operands"),
    Op("torch.functional.einsum", "overflow", operand_index=1, operand_keyword="operands"),
    Op("torch.nn.functional.linear", "overflow"),
    *_forms("overflow", "sum", inplace=False),
    *_forms("overflow", "nansum", inplace=False),
    *_forms("overflow", "prod", inplace=False),
    *_forms("overflow", "cumsum"),
    *_forms("overflow", "var", inplace=False),
    *_forms("overflow", "norm", inplace=False),
    Op("torch.linalg.norm", "overflow"),
    Op("torch.linalg.vector_norm", "overflow", operand_keyword="x"),
]


def _by_name(ops: list[Op]) -> dict[str, tuple[Op, ...]]:
    table: dict[str, tuple[Op, ...]] = {}
    for op in ops:
        table[op.name] = (*table.get(op.name, ()), op)
    return table


# Canonical name -> its rows, one per kind, in table order (``x * y`` is both an intended-infinity
# product and a float16 overflow). Runtime names that differ from the spelling in the source
# (``x / y`` is traced as ``torch.Tensor.div``) are all rows too, so a lookup by either name lands
# on the same kinds.
OP_TABLE: dict[str, tuple[Op, ...]] = _by_name(OPS)

# Python operators as libcst spells them -> the dunder we record for the site.
BINARY_OPERATORS: dict[str, str] = {
    "Multiply": "torch.Tensor.__mul__",
    "Add": "torch.Tensor.__add__",
    "Subtract": "torch.Tensor.__sub__",
    "MatrixMultiply": "torch.Tensor.__matmul__",
    "Divide": "torch.Tensor.__truediv__",
    "FloorDivide": "torch.Tensor.__floordiv__",
    "Modulo": "torch.Tensor.__mod__",
    "Power": "torch.Tensor.__pow__",
}
AUGMENTED_OPERATORS: dict[str, str] = {
    "MultiplyAssign": "torch.Tensor.__imul__",
    "AddAssign": "torch.Tensor.__iadd__",
    "SubtractAssign": "torch.Tensor.__isub__",
    "DivideAssign": "torch.Tensor.__itruediv__",
    "FloorDivideAssign": "torch.Tensor.__ifloordiv__",
    "ModuloAssign": "torch.Tensor.__imod__",
    "PowerAssign": "torch.Tensor.__ipow__",
}
# When the left operand is a number and the right one a tensor (`1 / x`, `2 ** x`).
REFLECTED_OPERATORS: dict[str, str] = {
    "Multiply": "torch.Tensor.__rmul__",
    "Add": "torch.Tensor.__radd__",
    "Subtract": "torch.Tensor.__rsub__",
    "MatrixMultiply": "torch.Tensor.__rmatmul__",
    "Divide": "torch.Tensor.__rtruediv__",
    "FloorDivide": "torch.Tensor.__rfloordiv__",
    "Modulo": "torch.Tensor.__rmod__",
    "Power": "torch.Tensor.__rpow__",
}

# Operators on Python numbers only (literals, len(), loop indices, .item(), sizes, int/float
# options): reported under these names, never a tensor's, and proved safe, because Python raises
# where a tensor would silently give NaN/INF. ``LOUD_ERRORS`` says what it raises, per kind; math.*
# functions on Python numbers raise the same way.
SCALAR_OPERATORS: dict[str, Op] = {
    "Divide": Op("builtins.float.__truediv__", "div", **_DIVISOR),
    "FloorDivide": Op("builtins.float.__floordiv__", "div", **_DIVISOR),
    "Modulo": Op("builtins.float.__mod__", "div", **_DIVISOR),
    "Power": Op("builtins.float.__pow__", "pow", **_POW),
    # silent in Python too: inf - inf and 0 * inf are nan (a site where an operand may be inf)
    "Multiply": Op("builtins.float.__mul__", "inf_arith"),
    "Add": Op("builtins.float.__add__", "inf_arith", inf_pair="opposite"),
    "Subtract": Op("builtins.float.__sub__", "inf_arith", inf_pair="same"),
}
_SCALAR_NAMES = frozenset(o.name for o in SCALAR_OPERATORS.values())
LOUD_ERRORS: dict[str, str] = {
    "div": "ZeroDivisionError",
    "pow": "ZeroDivisionError or OverflowError (or a complex result)",
    "exp": "OverflowError",
    "log": "ValueError (math domain error)",
    "log1p": "ValueError (math domain error)",
    "sqrt": "ValueError (math domain error)",
    "acos": "ValueError (math domain error)",
    "atanh": "ValueError (math domain error)",
    "acosh": "ValueError (math domain error)",
    "lgamma": "ValueError (math domain error)",
}


def loud_error(op: str, kind: str) -> str | None:
    """What Python raises where ``op`` on Python numbers would otherwise give NaN/INF, or None when
    the op has no loud form (a tensor op, numpy's ufuncs, which warn and return NaN/INF)."""
    if op in _SCALAR_NAMES or op.startswith("math."):
        return LOUD_ERRORS.get(kind)
    return None


# Library forms that are numerically safe by construction: never candidates,
# and, as producers, the analyzer may use their ranges. (log_softmax is safe from
# log(0) but not from a fully masked row: it is the "softmax" kind's row.)
SAFE_FORMS: frozenset[str] = frozenset(
    {
        "torch.nn.functional.logsigmoid",
        "torch.logsumexp",
        "torch.Tensor.logsumexp",
        "torch.special.logsumexp",
        "torch.xlogy",
        "torch.special.xlogy",
        "torch.Tensor.xlogy",
        "torch.nn.functional.normalize",
        "torch.nn.functional.cross_entropy",
        "torch.nn.functional.binary_cross_entropy_with_logits",
        "torch.nn.functional.nll_loss",
        "torch.nn.functional.kl_div",
        "torch.special.entr",
        "torch.special.log_ndtr",
        "torch.nn.functional.cosine_similarity",
        "torch.logaddexp",
        "torch.logaddexp2",
    }
)


# --- empty tensors ---------------------------------------------------------------


@dataclass(frozen=True)
class EmptySource:
    """A producer whose output can have zero elements for some inputs.

    ``words`` name it in verdict reasons. ``max_args``: the producer selects
    only with at most this many positional arguments (``torch.where(cond)``
    gives indices, ``torch.where(cond, a, b)`` does not). ``runtime_list``:
    empty only when its first argument is a list built at run time (appended
    to in a loop, a filtered comprehension), not a fixed list literal.
    """

    words: str
    max_args: int | None = None
    runtime_list: bool = False


# A mean of zero elements is NaN, and a tensor has zero elements, in practice,
# only after a data-dependent selection. A "mean" site exists only when its
# operand flows (analyzer/provenance.py, over the dataflow graph) from one of
# these producers, from boolean-mask indexing (``x[mask]``, ``x[x > 0]``), from
# indexing with indices such producers give, or from slicing with computed
# bounds. Keys are the short names of torch functions and Tensor methods.
EMPTY_SOURCES: dict[str, EmptySource] = {
    "masked_select": EmptySource("masked_select keeps only the elements its mask admits"),
    "nonzero": EmptySource("nonzero indices (none when everything is zero)"),
    "argwhere": EmptySource("argwhere indices (none when everything is zero)"),
    "where": EmptySource("torch.where(cond) indices (none when cond is all False)", max_args=1),
    **{
        name: EmptySource(f"{name} of a list built at run time", runtime_list=True)
        for name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "tensor", "as_tensor")
    },
}

# Producers of boolean masks (comparisons and logical ops are masks by syntax):
# indexing with one selects nothing when every entry is False.
MASK_PRODUCERS: frozenset[str] = frozenset(
    {
        "gt",
        "ge",
        "lt",
        "le",
        "eq",
        "ne",
        "greater",
        "greater_equal",
        "less",
        "less_equal",
        "not_equal",
        "logical_and",
        "logical_or",
        "logical_xor",
        "logical_not",
        "isfinite",
        "isnan",
        "isinf",
        "isposinf",
        "isneginf",
        "isclose",
        "isin",
        "signbit",
        "bool",
    }
)


def lookup(name: str) -> tuple[Op, ...]:
    """The catalogue rows for a canonical or runtime name, one per kind; () if the op is not unsafe."""
    return OP_TABLE.get(name, ())


def row(name: str, kind: str) -> Op | None:
    """The row of ``name`` for ``kind`` (a Site's op and kind), or None."""
    return next((op for op in OP_TABLE.get(name, ()) if op.kind == kind), None)


def rule_code(kind: str) -> str:
    k = KINDS.get(kind)
    return k.code if k else ERROR_CODE


def pow_region_applies(exponent: float | None) -> Callable[[float, float], bool]:
    """For ``pow``: the static test of a base range [lo, hi] given a literal exponent.

    Integer non-negative exponents are always safe (barring overflow, which we
    report only for exp-like ops); fractional ones need base >= 0; negative
    ones need the base away from 0 as well.
    """

    def safe(lo: float, hi: float) -> bool:
        if exponent is None:
            return False
        if float(exponent).is_integer() and exponent >= 0:
            return True
        if exponent >= 0:
            return lo >= 0.0
        if float(exponent).is_integer():
            return lo > 0.0 or hi < 0.0
        return lo > 0.0

    return safe
