"""Spectral-gradient sites: eigh/svd calls whose eigenvectors or singular vectors the program reads.

The derivative of the vectors of ``torch.linalg.eigh`` and ``torch.linalg.svd`` / ``torch.svd``
divides by the gaps between eigenvalues (singular values): at a repeated one the backward pass
is inf/NaN, while the forward value is finite. The derivative of the values alone is finite
there, so a call whose vectors the program never reads (``L, _ = eigh(A)``, ``eigh(A)[0]``,
``svd(A).S``, ``torch.svd(A, compute_uv=False)``) is no site, and neither are ``eigvalsh`` and
``svdvals``, which are no catalogue rows.

This module owns that question (``drop_unread_vectors``), asked of the site finder's candidates
with Python's ``ast``: the vectors are read when the call's result is indexed or attributed to a
vector output, unpacked into a name the same scope reads (``_``-prefixed names are throwaways),
bound to a name read in any way other than a value output, or used in any other way (returned,
passed on: the vectors may be read there). Whether a backward pass reaches the call is the
engine's question: it confirms such a site only by the gradient, and only when the matrix
depends on a tensor the program differentiates. Torch-free, like the whole static pass.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from grist_lsp.analyzer.catalogue import KINDS, row
from grist_lsp.analyzer.sites import Candidate


def drop_unread_vectors(candidates: list[Candidate], tree: ast.Module) -> list[Candidate]:
    """``candidates`` without the decompositions whose vectors the program never reads."""
    spectral = [c for c in candidates if KINDS[c.site.kind].region.gradient]
    if not spectral:
        return candidates
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    unread = {id(c) for c in spectral if not _vectors_read(c, parents, tree)}
    return [c for c in candidates if id(c) not in unread]


def _vectors_read(c: Candidate, parents: dict[int, ast.AST], tree: ast.Module) -> bool:
    call = c.node
    if not isinstance(call, ast.Call):
        return True
    if any(k.arg == "compute_uv" and _is_false(k.value) for k in call.keywords):
        return False  # torch.svd(A, compute_uv=False): zero-filled vectors, no gradient through them
    found = row(c.site.op, c.site.kind)
    vectors = found.vectors if found is not None else ()
    parent = parents.get(id(call))
    if isinstance(parent, ast.Attribute):
        return parent.attr in {name for _, name in vectors}
    if isinstance(parent, ast.Subscript) and parent.value is call:
        index = _constant_int(parent.slice)
        return index is None or _normalised(index, vectors) in {i for i, _ in vectors}
    if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is call:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        scope = _scope_of(call, parents, tree)
        return any(_target_reads_vectors(t, vectors, scope) for t in targets)
    return True


def _target_reads_vectors(target: ast.AST, vectors: tuple[tuple[int, str], ...], scope: ast.AST) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in target.elts):
            return True  # ``L, *rest = svd(A)``: positions shift; assume the vectors are read
        return any(i < len(target.elts) and _element_read(target.elts[i], scope) for i, _ in vectors)
    if isinstance(target, ast.Name):
        return any(_use_reads_vectors(use, vectors) for use in _loads(scope, target.id))
    return True  # ``self.decomposition = eigh(A)``: read elsewhere


def _element_read(element: ast.AST, scope: ast.AST) -> bool:
    if isinstance(element, ast.Name):
        return not element.id.startswith("_") and any(True for _ in _loads(scope, element.id))
    return True  # an attribute or a subscript target: read elsewhere


def _use_reads_vectors(use: tuple[ast.Name, ast.AST | None], vectors: tuple[tuple[int, str], ...]) -> bool:
    """One read of the name bound to the whole result: ``out.eigenvalues`` / ``out[0]`` read a
    value output only; anything else may reach the vectors."""
    name, parent = use
    if isinstance(parent, ast.Attribute) and parent.value is name:
        return parent.attr in {n for _, n in vectors}
    if isinstance(parent, ast.Subscript) and parent.value is name:
        index = _constant_int(parent.slice)
        return index is None or _normalised(index, vectors) in {i for i, _ in vectors}
    return True


def _loads(scope: ast.AST, name: str) -> Iterator[tuple[ast.Name, ast.AST | None]]:
    """Every read of ``name`` in ``scope`` (nested functions included: closures read it too),
    with its parent node."""
    for node in ast.walk(scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and child.id == name and isinstance(child.ctx, ast.Load):
                yield child, node


def _scope_of(node: ast.AST, parents: dict[int, ast.AST], tree: ast.Module) -> ast.AST:
    current = parents.get(id(node))
    while current is not None:
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return current
        current = parents.get(id(current))
    return tree


def _constant_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int)
    ):
        return -node.operand.value
    return None


def _normalised(index: int, vectors: tuple[tuple[int, str], ...]) -> int:
    """A negative index counted from the end of the op's tuple (whose last output is a vector:
    eigh's 2, svd's 3)."""
    return index if index >= 0 else index + 1 + max(i for i, _ in vectors)


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False
