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
from grist_lsp.analyzer.names import called_name


def registered_buffers(flow: DataFlow) -> dict[str, list[ast.expr | None]]:
    """Each registered name, with the values registered for it; ``None`` among them for a
    parameter (``register_parameter``: trained), a buffer registered without a value, or one the
    file changes in place."""
    found: dict[str, list[ast.expr | None]] = {}
    for node, _function in flow.operations:
        if (
            isinstance(node, ast.Call)
            and called_name(node.func) in ("register_buffer", "register_parameter")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            kept = called_name(node.func) == "register_buffer" and len(node.args) > 1
            found.setdefault(node.args[0].value, []).append(node.args[1] if kept else None)
    if found:
        for name in _changed_in_place(flow, set(found)):
            found[name].append(None)
    return found


def _changed_in_place(flow: DataFlow, names: set[str]) -> set[str]:
    """Which of the attribute ``names`` the module may change in place: an in-place method on it
    (on its ``.data``, or on a local name bound to it), an augmented assignment, an item or its
    ``.data`` assigned, ``out=`` of a call, or passing it to a function of this file or to one
    named in place (``ema_(self.var, v)``). When unsure, changed: its values are then data."""

    def named(e: ast.AST) -> str | None:
        while isinstance(e, (ast.Subscript, ast.Attribute)) and not (
            isinstance(e, ast.Attribute) and e.attr in names
        ):
            e = e.value
        if isinstance(e, ast.Name) and flow.is_use(e):  # v = self.var; v.mul_(m)
            for d in flow.defs_reaching(e):
                if d.how == "assign" and isinstance(d.value, ast.Attribute) and d.value.attr in names:
                    return d.value.attr
        return e.attr if isinstance(e, ast.Attribute) and e.attr in names else None

    changed: set[str] = set()
    for n in ast.walk(flow.tree):
        targets: list[ast.AST] = []
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_"):
                targets.append(n.func.value)
            targets += [k.value for k in n.keywords if k.arg == "out"]
            if called_name(n.func).endswith("_"):
                targets += [a for a in n.args if isinstance(a, ast.Attribute)]
            else:
                targets += _passed_to_a_changer(flow, n)
        elif isinstance(n, ast.AugAssign):
            targets.append(n.target)
        elif isinstance(n, ast.Assign):
            targets += [t for t in n.targets if isinstance(t, ast.Subscript)]
            targets += [t.value for t in n.targets if isinstance(t, ast.Attribute) and t.attr == "data"]
        for t in targets:
            name = named(t)
            if name is not None:
                changed.add(name)
    return changed


def _passed_to_a_changer(flow: DataFlow, call: ast.Call) -> list[ast.expr]:
    """The arguments of a call of this file's function that its body changes in place
    (``def ema_(stat, v): stat.mul_(m)``, ``def reset(buf): buf[:] = 0``)."""
    info = flow.function_info(flow.callee(call))
    if info is None:
        return []
    changed = _changed_names(info.node)
    return [
        a
        for a, p in zip(call.args, info.receiving(call))
        if isinstance(a, ast.Attribute) and p.name in changed
    ]


def _changed_names(func: ast.AST) -> set[str]:
    """The names a function changes in place: an in-place method, an item or augmented assignment."""
    out: set[str] = set()
    for n in ast.walk(func):
        target: ast.AST | None = None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_"):
            target = n.func.value
        elif isinstance(n, ast.AugAssign):
            target = n.target
        elif isinstance(n, ast.Assign) and n.targets and isinstance(n.targets[0], ast.Subscript):
            target = n.targets[0]
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Call)):
            target = target.func if isinstance(target, ast.Call) else target.value
        if isinstance(target, ast.Name):
            out.add(target.id)
    return out
