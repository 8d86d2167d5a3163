"""What a name really is: import-alias resolution to qualified names.

``import torch as th``, ``from torch import log``, ``import torch.nn.functional
as F``, ``from torch.nn import functional as F``, ``import numpy as np``: a name
or dotted attribute chain whose root's reaching definitions (from the dataflow
graph, so local shadowing is respected) are all the same import resolves to the
imported qualified name (``th.special.log1p`` -> ``torch.special.log1p``). Free
names that are Python builtins resolve to ``builtins.<name>``.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from grist_lsp.analyzer.dataflow import DataFlow

_BUILTINS = frozenset(dir(builtins))


@dataclass
class Resolver:
    flow: DataFlow
    _memo: dict[int, str | None] = field(default_factory=dict)

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
