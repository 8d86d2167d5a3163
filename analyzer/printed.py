"""Which operations only make a value that the program formats into a message or logs.

``f"perplexity {np.exp(loss.item()):.2f}"``, ``"acc {:.1f}".format(100 * correct / total)``,
``"%.3f" % (a / b)``, ``logger.info("lr %g", base_lr / warmup)``, ``pbar.set_postfix(loss=total /
n)``: a progress report. A NaN or INF there is shown to the user on the spot and flows into
nothing else; the product exists for the failures that are silent (DESIGN.md, "Silent, not
loud"), so such an operation is no site. ``print(model(x).log())`` is not a report but the
program's result, which a user needs finite: a bare argument of ``print`` stays a site.

The operations inside the reported values are found syntactically, from what the dataflow walk
already listed (``DataFlow.operations``, ``DataFlow.fstrings``), without a walk of the whole tree.
"""

from __future__ import annotations

import ast

from grist_lsp.analyzer.dataflow import DataFlow
from grist_lsp.analyzer.names import Resolver, called_name

# Methods that show a value (loggers, progress bars, metric writers), by name: on an object of
# another file these are what the name says. A method of this file's own classes is never one.
_SHOWING_METHODS = frozenset(
    {
        "debug",
        "info",
        "warning",
        "warn",
        "error",
        "critical",
        "exception",
        "set_postfix",
        "set_postfix_str",
        "set_description",
        "add_scalar",
        "add_scalars",
        "log_metric",
        "log_metrics",
    }
)

# Methods that keep what they are given (a meter, a list, a queue): an argument passed to one may
# be used later, so it is not only shown.
_KEEPING_METHODS = frozenset({"update", "append", "add", "extend", "put", "push", "record"})


def printed_operations(flow: DataFlow, resolver: Resolver) -> frozenset[int]:
    """The ids of the calls and binary operations whose value goes only into a message."""
    shown: list[ast.expr] = []
    for node, _function in flow.operations:
        shown += _shown_values(node, flow, resolver)
    for text in flow.fstrings.values():
        shown += [v.value for v in text.values if isinstance(v, ast.FormattedValue)]
    found: set[int] = set()
    for value in shown:
        _collect(value, flow, found)
    return frozenset(found)


def _collect(e: ast.AST, flow: DataFlow, found: set[int]) -> None:
    """The calls and binary operations of a shown value, without what a call of this file, an
    in-place call or a walrus passes on (``meter.update(loss / n)`` keeps ``loss / n``)."""
    if isinstance(e, ast.NamedExpr):
        return
    if isinstance(e, ast.Call):
        if called_name(e.func).endswith("_") or flow.callee(e) is not None or _unknown_method(e):
            return
    if isinstance(e, (ast.Call, ast.BinOp)):
        found.add(id(e))
    for child in ast.iter_child_nodes(e):
        _collect(child, flow, found)


def _unknown_method(call: ast.Call) -> bool:
    """A method of an object of unknown kind that is given arguments (``meter.update(x)``): it
    may keep them; a Tensor's own reading methods (``x.sum()``, ``x.mean(0)``) do not."""
    f = call.func
    return isinstance(f, ast.Attribute) and bool(call.args or call.keywords) and f.attr in _KEEPING_METHODS


def _shown_values(node: ast.AST, flow: DataFlow, resolver: Resolver) -> list[ast.expr]:
    """The arguments ``node`` formats into text or logs; [] for any other operation."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        text = node.left
        if isinstance(text, ast.Constant) and isinstance(text.value, str):
            return [node.right]  # "%.2f" % (a / b)
        return []
    if not isinstance(node, ast.Call):
        return []
    f = node.func
    last = called_name(f)
    if (last not in _SHOWING_METHODS and last not in ("format", "log")) or flow.callee(node) is not None:
        return []  # most calls are decided by their name, before it is resolved
    values = [*node.args, *(k.value for k in node.keywords)]
    qualified = resolver.qualified_name(f)
    if (qualified or "").startswith("logging."):
        return values
    if (
        isinstance(f, ast.Attribute)
        and f.attr == "format"
        and isinstance(f.value, (ast.Constant, ast.JoinedStr))
    ):
        return values  # "{:.4f}".format(ppl)
    if isinstance(f, ast.Attribute) and f.attr in _SHOWING_METHODS and qualified is None:
        return values[1:] if f.attr.startswith("add_") else values  # add_scalar(tag, value, step)
    return []
