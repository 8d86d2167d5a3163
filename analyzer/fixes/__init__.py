"""Propose idiomatic rewrites for an unsafe-op site (unverified; dynamic/verify.py re-checks them).

``propose_fixes(text, verdict)`` finds the site's expression in ``text`` with libcst (a
``Fixer(text)`` does it for each of a file's sites from one parse), rewrites it the way a person
would (``log(softmax(x))`` -> ``log_softmax(x)``, ``log(x)`` -> ``log(x.clamp_min(eps))``, a
sign-preserving guard for divisors ...) and returns ``Fix``es whose
edits replace the site's span (plus an import line when a new name is needed). The code's own
style is kept: the namespace it used (``F.`` / ``torch.`` / ``th.``), function versus method
form, in-place forms, and the ``unbiased=`` versus ``correction=`` keyword. ``eps`` follows the
operand's dtype (``catalogue.DTYPES``; float32 unless the witness says otherwise).

Nothing here runs user code or imports torch: it is cheap enough for the editor's quick fixes.

One module per family of kinds (``log``, ``division``, ``exp``, ``power``, ``domain``,
``reductions``, ``linalg``, ``infinity``, ``precision``), each a set of builders ``_BUILDERS`` below maps kinds to, over two shared ones:
``context`` (the site located in the tree, its ``_Context``, a ``_Proposal``) and ``build``
(libcst builders, operands, clamps and guards). Names shared inside the package keep their
leading underscore: they are not API.
"""

from __future__ import annotations

import functools

import libcst as cst

from grist_lsp.analyzer.analysis import file_dtype
from grist_lsp.analyzer.catalogue import KINDS, dtype_limits
from grist_lsp.model import Fix, Verdict

from .build import _double_where, _is_integer_dtype
from .context import _Context, _Index, eps_for, eps_near_one
from .division import _div_fixes
from .domain import _acos_fixes, _acosh_fixes, _lgamma_fixes, _logit_fixes
from .exp import _exp_fixes
from .infinity import _inf_arith_fixes
from .linalg import _cholesky_fixes, _inverse_fixes, _logdet_fixes, _spectral_fixes
from .log import _log1p_fixes, _log_fixes
from .power import _pow_fixes, _root_fixes
from .precision import _overflow_fixes
from .reductions import _mean_fixes, _softmax_fixes, _var_fixes

__all__ = ["Fixer", "eps_for", "eps_near_one", "propose_fixes"]


class Fixer:
    """The fixes of one file's sites. The file is parsed and indexed (libcst metadata, the costly
    part) once, on the first site that needs it, however many of its sites ask afterwards."""

    def __init__(self, text: str) -> None:
        self.text = text

    @functools.cached_property
    def _tree(self) -> tuple[cst.Module, _Index] | None:
        try:
            module = cst.parse_module(self.text)
        except cst.ParserSyntaxError:
            return None
        return module, _Index.build(module)

    def propose(self, verdict: Verdict) -> list[Fix]:
        """Candidate rewrites for ``verdict``'s site, best first; [] when none applies.

        The fixes are *unverified* (``verified=False``): dynamic/verify.py applies each one and
        re-runs the static pass and the engine before marking it verified.
        """
        site = verdict.site
        if site.kind not in KINDS or self._tree is None:
            return []
        module, index = self._tree
        node = index.find(site.span)
        if node is None:
            return []
        return _propose(self.text, module, index, node, verdict)


def propose_fixes(text: str, verdict: Verdict) -> list[Fix]:
    """Candidate rewrites for ``verdict``'s site in ``text`` (``Fixer(text).propose(verdict)``)."""
    return Fixer(text).propose(verdict)


def _propose(text: str, module: cst.Module, index: _Index, node: cst.CSTNode, verdict: Verdict) -> list[Fix]:
    site = verdict.site
    if verdict.witness is not None and verdict.witness.operand is not None:
        dtype = verdict.witness.operand.dtype
    else:  # no witness: the precision the static pass found for the operand, or the file's
        dtype = site.dtype or file_dtype(text)
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
        operand_label=site.operand,
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
    "logdet": _logdet_fixes,
    "cholesky": _cholesky_fixes,
    "inverse": _inverse_fixes,
    "spectral": _spectral_fixes,
    "inf_arith": _inf_arith_fixes,
    "overflow": _overflow_fixes,
}
