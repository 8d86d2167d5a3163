"""What a module's classes register as buffers and parameters by name, and which they change.

``self.register_buffer("alphas_cumprod", alphas_cumprod)`` (or through a local helper named
``register_buffer``, as diffusion code writes it) is read back as ``self.alphas_cumprod``: the
value registered tells what the attribute holds, unless the file changes it in place afterwards
(``self.center.mul_(m)``, ``self.running_var.data.copy_(v)``, ``self.count += 1``,
``self.queue[i] = k``, ``out=self.buf``), when its values come from whatever changed it.
"""

from __future__ import annotations

import ast

from grist_lsp.analyzer.dataflow import DataFlow


def registered_buffers(flow: DataFlow) -> dict[str, list[ast.expr | None]]:
    """Each registered name, with the values registered for it; ``None`` among them for a
    parameter (``register_parameter``: trained), a buffer registered without a value, or one the
    file changes in place."""
    found: dict[str, list[ast.expr | None]] = {}
    for node, _function in flow.operations:
        if (
            isinstance(node, ast.Call)
            and _called_name(node.func) in ("register_buffer", "register_parameter")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            kept = _called_name(node.func) == "register_buffer" and len(node.args) > 1
            found.setdefault(node.args[0].value, []).append(node.args[1] if kept else None)
    if found:
        for name in _changed_in_place(flow.tree, set(found)):
            found[name].append(None)
    return found


def _called_name(f: ast.expr) -> str:
    """The last name of a called expression (``register_buffer`` of ``self.register_buffer``)."""
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _changed_in_place(tree: ast.Module, names: set[str]) -> set[str]:
    """Which of the attribute ``names`` the module changes in place: an in-place method on it (or
    on its ``.data``), an augmented assignment, an item assigned, or ``out=`` of a call."""

    def named(e: ast.AST) -> str | None:
        while isinstance(e, (ast.Subscript, ast.Attribute)) and not (
            isinstance(e, ast.Attribute) and e.attr in names
        ):
            e = e.value
        return e.attr if isinstance(e, ast.Attribute) and e.attr in names else None

    changed: set[str] = set()
    for n in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_"):
            targets.append(n.func.value)
        if isinstance(n, ast.Call):
            targets += [k.value for k in n.keywords if k.arg == "out"]
        elif isinstance(n, ast.AugAssign):
            targets.append(n.target)
        elif isinstance(n, ast.Assign):
            targets += [t for t in n.targets if isinstance(t, ast.Subscript)]
        for t in targets:
            name = named(t)
            if name is not None:
                changed.add(name)
    return changed
