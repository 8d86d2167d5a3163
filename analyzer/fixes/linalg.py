"""Fixes for linear-algebra sites: ``logdet`` of a matrix whose determinant may reach 0 or go
negative, ``cholesky`` of a matrix that may not be positive definite, ``inverse`` (inv, solve)
of a matrix that may be singular.

* A jitter on the diagonal, ``A + jitter * I`` (the dtype's ``DtypeLimits.jitter``), first:
  the usual repair of a covariance or kernel matrix that is positive semi-definite in exact
  arithmetic but singular (duplicated points, fewer samples than dimensions) or, after
  round-off, a hair indefinite. It keeps every well-conditioned result to within the jitter.
  It is no repair for a matrix that can be really indefinite: the engine's re-check then finds
  the site failing again and leaves it unverified.
* For ``logdet``, ``torch.linalg.slogdet(A).logabsdet``: log|det A|, what a normalizing flow's
  log-det-Jacobian means. It never gives NaN for a negative determinant (the usual failure of a
  general matrix), and the same value wherever the determinant is positive; a singular matrix
  still gives -inf, as the title says.

* For ``spectral`` (the vectors of eigh/svd, whose gradient divides by eigenvalue gaps): a tie
  breaker, ``A + jitter * diag(0, 1, ..., n-1)``, which keeps a repeated eigenvalue of A from
  staying repeated (the gradient stays finite, up to 1/jitter at a near tie, and the vectors of
  such a tie are those of the perturbation); or ``A.detach()``, which cuts the gradient through
  the decomposition altogether (a cost the title states: nothing behind A is trained through it).
* For ``inverse``, ``torch.linalg.pinv(A)`` (and ``pinv(A) @ B`` for ``solve(A, B)``): the
  least-squares (minimum-norm) answer, what regression and Newton-type steps fall back to on a
  rank-deficient system. It equals the inverse wherever A is well conditioned; it cuts singular
  values below its relative tolerance instead of dividing by them.

``cholesky_ex`` is not offered as a rewrite: it returns a factor of the leading block and an
``info`` code instead of raising, which only helps a program that then checks ``info``.
The jitter needs the matrix twice (its value and its size), so it is offered only when the
operand is a name or an attribute (evaluating an expression twice could change what it means).
"""

from __future__ import annotations

import libcst as cst

from .build import _arg, _atom, _expr, _op_label, _operand, _strip
from .context import _Context, _dotted, _num, _Proposal


def _namespace(ctx: _Context) -> tuple[str, list[str]]:
    """How to spell ``torch`` here, and the import line to add if the file has none."""
    alias = ctx.torch_namespace()
    return (alias, []) if alias is not None else ("torch", ["import torch"])


def _jitter(ctx: _Context, words: str) -> list[_Proposal]:
    """The site's call with its matrix operand ``A`` replaced by ``A + jitter * I``."""
    title = f"Add {_num(ctx.limits.jitter)} to the diagonal of the matrix of {_op_label(ctx)} {words}"
    return _plus_diagonal(ctx, "{torch}.eye({a}.shape[-1], dtype={a}.dtype, device={a}.device)", title)


def _plus_diagonal(ctx: _Context, diagonal: str, title: str) -> list[_Proposal]:
    """The site's call with its matrix operand ``A`` replaced by ``A + jitter * D``, ``D`` the
    ``diagonal`` template (``{torch}``: torch's name here, ``{a}``: the matrix)."""
    operand = _operand(ctx)
    if operand is None or not isinstance(ctx.node, cst.Call):
        return []
    a = _strip(operand.node)
    if not isinstance(a, (cst.Name, cst.Attribute)) or not _dotted(a):
        return []
    name = _dotted(a)
    torch_name, imports = _namespace(ctx)
    jitter = _num(ctx.limits.jitter)
    jittered = _expr(f"{name} + {jitter} * {diagonal.format(torch=torch_name, a=name)}")
    if operand.form in ("method", "inplace"):
        jittered = _atom(jittered)
    new = ctx.node.deep_replace(operand.node, jittered)
    return [_Proposal(f"{title}{ctx.dtype_note()}", ctx.node, new, imports)]


def _logdet_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = _jitter(ctx, "(a positive semi-definite matrix becomes positive definite)")
    operand = _operand(ctx)
    if operand is not None and isinstance(ctx.node, cst.Call):
        torch_name, imports = _namespace(ctx)
        new = cst.Attribute(
            value=cst.Call(func=_expr(f"{torch_name}.linalg.slogdet"), args=[cst.Arg(_strip(operand.node))]),
            attr=cst.Name("logabsdet"),
        )
        proposals.append(
            _Proposal(
                "Use torch.linalg.slogdet(A).logabsdet (log|det A|: no NaN for a negative determinant; "
                "a singular matrix still gives -inf)",
                ctx.node,
                new,
                imports,
            )
        )
    return proposals


def _cholesky_fixes(ctx: _Context) -> list[_Proposal]:
    return _jitter(ctx, "(a positive semi-definite matrix becomes positive definite)")


def _inverse_fixes(ctx: _Context) -> list[_Proposal]:
    proposals = _jitter(ctx, "(a singular covariance, kernel or normal matrix becomes invertible)")
    pinv = _pseudo_inverse(ctx)
    return proposals + ([pinv] if pinv is not None else [])


def _pseudo_inverse(ctx: _Context) -> _Proposal | None:
    """``inv(A)`` -> ``pinv(A)``; ``solve(A, B)`` -> ``pinv(A) @ B`` when the call says nothing
    else (``left=False``, ``out=`` would change what the product must be)."""
    operand = _operand(ctx)
    if operand is None or not isinstance(ctx.node, cst.Call):
        return None
    torch_name, imports = _namespace(ctx)
    pinv = cst.Call(func=_expr(f"{torch_name}.linalg.pinv"), args=[cst.Arg(_strip(operand.node))])
    new: cst.BaseExpression = pinv
    if _dotted(ctx.node.func).endswith("solve"):
        rhs = _arg(ctx.node, 1, "B")
        if rhs is None or len(ctx.node.args) != 2 or rhs.star:
            return None
        new = cst.BinaryOperation(left=pinv, operator=cst.MatrixMultiply(), right=_atom(_strip(rhs.value)))
    elif len(ctx.node.args) != (0 if operand.form in ("method", "inplace") else 1):
        return None  # ``out=`` and the like: pinv has no such argument
    return _Proposal(
        f"Use torch.linalg.pinv (the least-squares solution; equal to the inverse where {_op_label(ctx)}'s "
        "matrix is invertible, finite where it is singular)",
        ctx.node,
        new,
        imports,
    )


def _spectral_fixes(ctx: _Context) -> list[_Proposal]:
    """Break the tie, or cut the gradient: the vectors' derivative divides by eigenvalue gaps."""
    tie = _plus_diagonal(
        ctx,
        "{torch}.diag({torch}.arange({a}.shape[-1], dtype={a}.dtype, device={a}.device))",
        f"Break ties in the spectrum of the matrix of {_op_label(ctx)}: add "
        f"{_num(ctx.limits.jitter)} * diag(0, 1, ..., n-1) (the vectors of a near tie are then set by "
        f"it, and their gradient can reach 1/{_num(ctx.limits.jitter)})",
    )
    operand = _operand(ctx)
    if operand is None or not isinstance(ctx.node, cst.Call):
        return tie
    detached = cst.Call(func=cst.Attribute(value=_atom(_strip(operand.node)), attr=cst.Name("detach")))
    new = ctx.node.deep_replace(operand.node, detached)
    title = (
        f"Detach the matrix of {_op_label(ctx)} (no gradient flows through the decomposition: "
        "what is behind the matrix is no longer trained through it)"
    )
    return [*tie, _Proposal(title, ctx.node, new)]
