"""What a name really is: import-alias resolution to qualified names.

``import torch as th``, ``from torch import log``, ``import torch.nn.functional
as F``, ``from torch.nn import functional as F``, ``import numpy as np``: a name
or dotted attribute chain whose root's reaching definitions (from the dataflow
graph, so local shadowing is respected) are all the same import resolves to the
imported qualified name (``th.special.log1p`` -> ``torch.special.log1p``). Free
names that are Python builtins resolve to ``builtins.<name>``. ``Resolver.iterated``: what a
``for`` loop really iterates, through the names it is bound to and progress-bar wrappers.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from grist_lsp.analyzer.dataflow import DataFlow

_BUILTINS = frozenset(dir(builtins))


def called_name(func: ast.expr) -> str:
    """The last name of a called expression (``register_buffer`` of ``self.register_buffer``),
    "" for anything else called (``fns[0](x)``)."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _wraps_an_iterable(qualified: str | None, func: ast.expr) -> bool:
    """``iter(x)``, ``tqdm(x)`` and the progress bars named after it (ultralytics' ``TQDM``,
    ``tqdm.auto.tqdm``), ``rich.progress.track(x)``: iterating gives what ``x`` gives."""
    if qualified == "builtins.iter":
        return True
    last = (qualified or called_name(func)).split(".")[-1]
    return "tqdm" in last.lower() or last == "track" or (qualified or "").startswith("tqdm.")


@dataclass
class Resolver:
    flow: DataFlow
    _memo: dict[int, str | None] = field(default_factory=dict)
    _iterated_by_def: dict[int, list[ast.AST | None]] = field(default_factory=dict)
    _iterating: set[int] = field(default_factory=set)  # definitions being followed (cycles)

    def qualified_name(self, expr: ast.AST) -> str | None:
        """The fully qualified name an expression denotes, or None (a local value, a call, ...)."""
        key = id(expr)
        if key not in self._memo:
            self._memo[key] = self._resolve(expr)
        return self._memo[key]

    def _resolve(self, expr: ast.AST) -> str | None:
        if isinstance(expr, ast.Name):
            defs = self.flow.defs_reaching(expr)
            if not defs:
                return f"builtins.{expr.id}" if expr.id in _BUILTINS else None
            names: set[str | None] = set()
            for d in defs:
                if d.how == "import":
                    names.add(d.qualified)
                elif d.how == "refine" and d.node is not expr:
                    names.add(self.qualified_name(d.node))  # a guard does not change what a name is
                elif (
                    d.how == "assign"
                    and isinstance(d.value, (ast.Name, ast.Attribute))
                    and d.value is not expr
                ):
                    # `F = torch.nn.functional`, `log = torch.log`: an alias by assignment
                    self._memo[id(expr)] = None  # cut cycles such as `x = x`
                    names.add(self.qualified_name(d.value))
                else:
                    return None
            return names.pop() if len(names) == 1 else None
        if isinstance(expr, ast.Attribute):
            base = self.qualified_name(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    def iterated(self, it: ast.AST | None) -> list[ast.AST | None]:
        """What a loop over ``it`` iterates: ``it`` itself, or, for a name every definition of which
        is an assignment (``pbar = enumerate(loader)``, then ``pbar = tqdm(pbar, total=nb)``),
        what each assigns; a progress bar or ``iter()`` gives what it wraps."""
        return self._iterated(it, 0) or [it]

    def _iterated(self, it: ast.AST | None, depth: int) -> list[ast.AST | None]:
        """``iterated``, memoised per definition; a definition under evaluation adds nothing (a
        cycle: ``loader = tqdm(loader)`` in an epoch loop reaches itself)."""
        if depth > 8:
            return [it]
        if isinstance(it, ast.Call) and it.args and _wraps_an_iterable(self.qualified_name(it.func), it.func):
            return self._iterated(it.args[0], depth + 1)
        if not (isinstance(it, ast.Name) and self.flow.is_use(it)):
            return [it]
        defs = self.flow.defs_reaching(it)
        # only to what a loop can iterate without being filled first: a call or another name (a
        # list display may be appended to later: it is iterated as the name it is bound to)
        if not defs or not all(d.how == "assign" and isinstance(d.value, (ast.Call, ast.Name)) for d in defs):
            return [it]
        found: dict[int, ast.AST | None] = {}
        for d in defs:
            if d.key not in self._iterating:
                if d.key not in self._iterated_by_def:
                    self._iterating.add(d.key)
                    self._iterated_by_def[d.key] = self._iterated(d.value, depth + 1)
                    self._iterating.discard(d.key)
                found.update((id(x), x) for x in self._iterated_by_def[d.key])
        return list(found.values())
