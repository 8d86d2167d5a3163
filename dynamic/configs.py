"""Constructor arguments for module probes: config dataclasses made at small sizes, and the text
that names them in a probe's label (``probe:model.py:GPT(GPTConfig(n_layer=2, n_embd=32),)``).

Library modules are often built from one config object (``GPT(GPTConfig(...))``, ``Transformer(
ModelArgs(...))``) whose defaults are the published model's sizes: far too large to probe, and
the constructor cannot be filled with plain numbers. A config is synthesized from its fields:
every field keeps its default except whole numbers, which shrink (``small_int``) so that the
module is cheap and its divisibility checks (``n_embd % n_head == 0``) still hold. The label
holds the fields that differ from the defaults, so a replay (and a reproducer) rebuilds the same
object by calling the same dataclass with the same keywords (``constructor_args``), never by
evaluating arbitrary text.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from grist_lsp.analyzer.parsing import UNPARSABLE, parse

SIZE = 32  # what a size (a width, a vocabulary, a sequence length) shrinks to
COUNT = 2  # what a count (layers, heads) shrinks to
SIZE_FROM = 64  # a default at least this large is taken for a size, a smaller one for a count
MAX_CONFIGS = 3  # dataclasses tried for one unannotated parameter


class ConstructorTextError(ValueError):
    """A probe label's constructor text that names something other than literals and dataclasses."""


def _power_of_two_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def small_int(default: int, sentinels: bool) -> int:
    """A whole-number field at a small size. Powers of two divide one another, so a width that
    the default's head count divides is still divided by the smaller head count. A default <= 0
    is a sentinel (``vocab_size = -1``: set later) kept unless ``sentinels`` replaces it."""
    if default <= 0:
        return SIZE if sentinels else default
    if default >= SIZE_FROM:
        return SIZE
    return min(_power_of_two_at_most(default), COUNT)


def _is_int(annotation: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return False
    return isinstance(default, int) or annotation in (int, "int")


def synthesize(cls: type, sentinels: bool) -> Any:
    """An instance of dataclass ``cls``: defaults kept, whole numbers small; None when a required
    field has no value we can make (its constructor or ``__post_init__`` may still refuse)."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING
        default: Any = f.default if has_default else None
        if _is_int(f.type, default):
            kwargs[f.name] = small_int(int(default), sentinels) if isinstance(default, int) else SIZE
        elif has_default or f.default_factory is not dataclasses.MISSING:
            continue
        elif f.type in (float, "float"):
            kwargs[f.name] = 0.1
        elif f.type in (bool, "bool"):
            kwargs[f.name] = False
        else:
            return None
    return cls(**kwargs)


def _dataclass_named(annotation: Any, namespace: Mapping[str, Any]) -> type | None:
    if isinstance(annotation, str):
        annotation = namespace.get(annotation.strip("'\""))
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    return None


def config_classes(param: inspect.Parameter, namespace: Mapping[str, Any]) -> list[type]:
    """The dataclasses a constructor parameter may take: its annotation's, else (unannotated, as
    in ``def __init__(self, config)``) the module's dataclasses, those whose name holds the
    parameter's name first."""
    if param.annotation is not inspect.Parameter.empty:
        named = _dataclass_named(param.annotation, namespace)
        return [named] if named is not None else []
    found = [v for v in namespace.values() if isinstance(v, type) and dataclasses.is_dataclass(v)]
    word = param.name.lower().strip("_")
    found.sort(key=lambda c: word not in c.__name__.lower())
    return found[:MAX_CONFIGS]


def annotated_config(params: list[inspect.Parameter], namespace: Mapping[str, Any]) -> bool:
    """Whether a parameter says by its annotation that it takes a dataclass: then a synthesized
    config is tried before plain numbers (an unannotated one is tried after them: ``def
    __init__(self, dim)`` in a module that also defines a config must still get its 16)."""
    return any(
        p.annotation is not inspect.Parameter.empty and _dataclass_named(p.annotation, namespace) is not None
        for p in params
    )


def config_constructors(
    params: list[inspect.Parameter], namespace: Mapping[str, Any], fill: int
) -> Iterator[tuple]:
    """Constructor arguments that give each config-like parameter (of the constructor's required
    ``params``) a synthesized dataclass, the others ``fill``, most plausible first; nothing when
    no parameter takes a dataclass."""
    choices = [config_classes(p, namespace) for p in params]
    if not any(choices):
        return
    for sentinels in (False, True):
        for pick in range(max(len(c) for c in choices)):
            args: list[Any] = []
            for classes in choices:
                if not classes:
                    args.append(fill)
                    continue
                try:
                    made = synthesize(classes[min(pick, len(classes) - 1)], sentinels)
                except Exception:  # the config's own checks refused these sizes
                    made = None
                if made is None:
                    break
                args.append(made)
            else:
                yield tuple(args)


# --- the constructor's text in a probe label ----------------------------------------------


def constructor_text(args: tuple, namespace: Mapping[str, Any]) -> str | None:
    """``args`` as the label shows them, a tuple's spelling (``(16, 16)``, ``(GPTConfig(n_layer=2),)``);
    a dataclass by the name the module binds it to, with the fields that differ from their
    defaults. None when a value cannot be written so that ``constructor_args`` rebuilds it."""
    parts = [_value_text(a, namespace) for a in args]
    if any(p is None for p in parts):
        return None
    return "(" + ", ".join(p for p in parts if p is not None) + ("," if len(parts) == 1 else "") + ")"


def _value_text(value: Any, namespace: Mapping[str, Any]) -> str | None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        name = next((k for k, v in namespace.items() if v is cls), None)
        if name is None:
            return None
        fields = []
        for f in dataclasses.fields(value):
            current = getattr(value, f.name)
            if not f.init or (f.default is not dataclasses.MISSING and current == f.default):
                continue
            shown = _value_text(current, namespace)
            if shown is None:
                return None
            fields.append(f"{f.name}={shown}")
        return f"{name}({', '.join(fields)})"
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return text


def constructor_args(text: str, namespace: Mapping[str, Any]) -> tuple:
    """The constructor arguments a label's text names, built from literals and calls of the
    module's dataclasses with keywords (anything else raises ``ConstructorTextError``)."""
    tree = _expression(text)
    value = _build(tree, namespace)
    return tuple(value) if isinstance(tree, ast.Tuple) else (value,)


def _expression(text: str) -> ast.expr:
    try:
        body = parse(text).body
    except UNPARSABLE as e:
        raise ConstructorTextError(f"constructor arguments {text!r} do not parse ({e})") from e
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        raise ConstructorTextError(f"constructor arguments {text!r} are not one expression")
    return body[0].value


def _build(node: ast.expr, namespace: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Tuple):
        return tuple(_build(e, namespace) for e in node.elts)
    if isinstance(node, ast.Call):
        cls = namespace.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)) or node.args:
            raise ConstructorTextError(
                f"constructor arguments: {ast.unparse(node)} is not a dataclass of the module called with keywords"
            )
        return cls(**{k.arg: _build(k.value, namespace) for k in node.keywords if k.arg})
    try:
        return ast.literal_eval(node)
    except ValueError as e:
        raise ConstructorTextError(f"constructor arguments: {ast.unparse(node)} is not a literal") from e


def constructor_source(text: str, module: str) -> str:
    """Python code for the constructor arguments, the dataclasses read from the module bound to
    ``module`` (``(program.GPTConfig(n_layer=2),)``): how a reproducer builds them."""
    tree = _expression(text)

    class Qualify(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name):
                node.func = ast.Attribute(
                    value=ast.Name(id=module, ctx=ast.Load()), attr=node.func.id, ctx=ast.Load()
                )
            return node

    return ast.unparse(Qualify().visit(tree))
