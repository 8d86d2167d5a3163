"""Which tensors may be float16: the precision a site is judged in.

float16's largest finite value is 65504, so a product or reduction of float16 operands may be
inf from finite ones (``overflow``, GRIST119), and a site whose operand may be float16 takes
that dtype's eps in its fixes (1e-8 is 0 in float16). bfloat16 keeps float32's exponent range:
it moves neither limit, and is not tracked here.

``Precision.half`` follows the dataflow graph (names through their reaching definitions,
in-file calls through their returns, parameters through the arguments in-file calls pass) back
to where a tensor got its dtype:

* a cast: ``.half()``, ``.to(torch.float16)``, ``.type(torch.HalfTensor)``, a numpy array's
  ``.astype(np.float16)`` that a tensor is made from;
* a constructor given ``dtype=torch.float16``, a legacy ``torch.HalfTensor(...)``;
* an op that keeps its operands' dtype (elementwise ops, reductions, views, ``*_like``, a
  module's call, which returns its input's dtype);
* a float16 autocast region (``torch.autocast("cuda")``, ``torch.autocast(..., dtype=
  torch.float16)``, ``torch.cuda.amp.autocast()``, as a ``with`` block or a decorator), where
  matrix products and module calls are float16, in the block and in the file's functions it
  calls. Autocast runs sums, norms, powers, exp and log in float32: those are float32 there;
* a method of a module class the file casts (``Net().half()``, ``model.to(torch.float16)``):
  its parameters and ``self`` attributes.

The walk stops at casts to another dtype (``.float()``, ``dtype=torch.float32``) and at ops
whose result is not floating point (comparisons, ``argmax``). Answers are short words for the
verdict's reason, or None (no evidence of float16: the file's dtype applies).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from grist_lsp.analyzer.catalogue import MASK_PRODUCERS
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.positions import node_words
from grist_lsp.analyzer.provenance import Provenance
from grist_lsp.analyzer.ranges import RangeAnalysis

# A file without any of these makes no float16 tensor: the question is not asked there.
_SPELLS_HALF = re.compile(r"(?<!b)float16|\bhalf\b|HalfTensor|autocast")
_HALF_DTYPES = frozenset({"torch.float16", "torch.half", "numpy.float16", "numpy.half", "float16"})
_HALF_TENSOR_TYPES = frozenset({"torch.HalfTensor", "torch.cuda.HalfTensor"})
# Casts by method name: to float16, or to anything else (the walk stops).
_TO_HALF = frozenset({"half"})
_TO_OTHER = frozenset({"float", "double", "bfloat16", "long", "int", "short", "bool", "byte", "char"})
_NOT_FLOATING = MASK_PRODUCERS | {
    "argmax",
    "argmin",
    "argsort",
    "nonzero",
    "argwhere",
    "item",
    "tolist",
    "size",
    "numel",
    "dim",
    "numpy",
}
_NOT_TENSOR_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout"})
# Autocast's lower-precision ops: their result is float16 in a float16 region whatever the
# operands (torch.amp's "CUDA Ops that can autocast to float16" list, the ones programs spell).
_AUTOCAST_HALF = frozenset(
    {
        "matmul",
        "mm",
        "bmm",
        "baddbmm",
        "addmm",
        "addbmm",
        "mv",
        "einsum",
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "__matmul__",
        "__rmatmul__",
    }
)
# Autocast's float32 ops: their result is float32 in a region whatever the operands.
_AUTOCAST_FLOAT = frozenset(
    {
        "sum",
        "prod",
        "cumsum",
        "cumprod",
        "norm",
        "pow",
        "exp",
        "log",
        "log_softmax",
        "softmax",
        "mse_loss",
        "cross_entropy",
        "layer_norm",
        "var",
        "std",
    }
)
_AUTOCAST = frozenset(
    {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"}
)


def spells_half(text: str) -> bool:
    """May the file make a float16 tensor at all (cheap: asked before any walk)?"""
    return _SPELLS_HALF.search(text) is not None


@dataclass
class Precision:
    flow: DataFlow
    resolver: Resolver
    ranges: RangeAnalysis
    provenance: Provenance
    # line spans of float16 autocast regions, with words; the file's functions they call
    _regions: list[tuple[int, int, str]] = field(default_factory=list)
    _autocast_functions: dict[int, str] = field(default_factory=dict)
    _half_classes: dict[int, str] = field(default_factory=dict)
    _function_of: dict[int, ast.AST] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._find_regions()
        self._find_half_classes()

    # --- entry points ------------------------------------------------------------------

    def half(self, e: ast.AST | None) -> str | None:
        """Words on how the tensor ``e`` may be float16, or None."""
        return self.provenance.asked("float16", e, self._half)

    def autocast_at(self, node: ast.AST) -> str | None:
        """Words when ``node`` runs inside a float16 autocast region (directly or in a function
        such a region calls), or None."""
        line = getattr(node, "lineno", 0)
        for first, last, words in self._regions:
            if first <= line <= last:
                return words
        owner = self._owner(node)
        while owner is not None:
            words = self._autocast_functions.get(id(owner))
            if words is not None:
                return words
            owner = self._owner(owner)
        return None

    # --- tensors -----------------------------------------------------------------------

    def _half(self, e: ast.AST) -> str | None:
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.MatMult):
                region = self.autocast_at(e)
                if region is not None:
                    return f"a matrix product in {region}"
            return self.half(e.left) or self.half(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.half(e.operand)
        if isinstance(e, ast.IfExp):
            return self.half(e.body) or self.half(e.orelse)
        if isinstance(e, ast.Subscript):
            return self.half(e.value)
        if isinstance(e, ast.NamedExpr):
            return self.half(e.value)
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Call):
            return self.half(e.value)  # x.max(-1).values, f(x).T
        if isinstance(e, ast.Attribute) and e.attr in _NOT_TENSOR_ATTRIBUTES:
            return None
        if isinstance(e, (ast.Name, ast.Attribute)) and self.flow.is_use(e):
            cast = self._in_half_class(e)
            if cast is not None:
                return cast
            defs = self.flow.defs_reaching(e)
            for d in defs:
                got = self._def(d)
                if got is not None:
                    return got
            if defs or isinstance(e, ast.Name):
                return None
        if isinstance(e, ast.Attribute):
            # x.T, x.data, x.grad of a float16 tensor; model.weight of a module cast to float16
            return self.half(e.value)
        return None

    def _def(self, d: Def) -> str | None:
        if d.how == "param" and d.owner is not None:
            cls = self.flow.method_class.get(id(d.owner))
            if cls is not None and d.param_index > 0 and id(cls) in self._half_classes:
                return self._half_classes[id(cls)]
        return self.provenance.through_def(d, self.half)

    def _in_half_class(self, e: ast.AST) -> str | None:
        """``self.w`` in a method of a module class the file casts to float16."""
        if not (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)):
            return None
        method = self._owner(e)
        if method is None or self.flow.self_names.get(id(method)) != e.value.id:
            return None
        cls = self.flow.method_class.get(id(method))
        return self._half_classes.get(id(cls)) if cls is not None else None

    def _call(self, call: ast.Call) -> str | None:
        given = self._dtype_keyword(call)
        if given is not None:
            return given or None
        returned = self.flow.returned(call)
        if returned is not None:
            return self._first(returned)
        qn = self.resolver.qualified_name(call.func)
        if qn is None and isinstance(call.func, ast.Attribute):
            cast = self._method_cast(call, call.func.attr)  # a tensor's or a module's: both cast
            if cast is not None:
                return cast or None
        receiver = self.ranges.method_receiver(call) if qn is None else None
        if qn is not None:
            if qn in _HALF_TENSOR_TYPES:
                return f"a {qn.rsplit('.', 1)[-1]}: {node_words(call, 'a tensor')}"
            if not qn.startswith("torch."):
                return None  # another library's value (numpy is float64 or float32)
            name = qn.rsplit(".", 1)[-1]
            operands: list[ast.AST] = list(call.args)
        elif receiver is not None and isinstance(call.func, ast.Attribute):
            name = call.func.attr
            operands = [receiver, *call.args]
        else:
            region = self.autocast_at(call)
            if region is not None:
                return f"a module's output in {region}"
            return self._first(call.args)  # a module's call returns its input's dtype
        if name in _NOT_FLOATING:
            return None
        region = self.autocast_at(call)
        if region is not None:
            if name in _AUTOCAST_HALF:
                return f"{name} in {region}"
            if name in _AUTOCAST_FLOAT:
                return None
        return self._first(a.value if isinstance(a, ast.Starred) else a for a in operands)

    def _method_cast(self, call: ast.Call, name: str) -> str | None:
        """For a cast method: words when it casts to float16, "" when to anything else, None
        when ``name`` is no cast (or ``.to(device)``, which keeps the dtype)."""
        if name in _TO_HALF:
            return f"{node_words(call, 'a cast')}"
        if name in _TO_OTHER:
            return ""
        if name in ("to", "type", "astype"):  # astype: numpy arrays a tensor is made from
            for a in [*call.args, *(k.value for k in call.keywords if k.arg in (None, "dtype"))]:
                dtype = self._dtype_name(a)
                if dtype is not None:
                    return node_words(call, "a cast") if dtype in _HALF_DTYPES | _HALF_TENSOR_TYPES else ""
        return None

    def _dtype_keyword(self, call: ast.Call) -> str | None:
        """For a call given ``dtype=``: words when it is float16, "" when another dtype, None
        when the call has no such keyword (or one this pass cannot read)."""
        for k in call.keywords:
            if k.arg == "dtype":
                dtype = self._dtype_name(k.value)
                if dtype is None:
                    return None
                return f"dtype={dtype}: {node_words(call, 'a tensor')}" if dtype in _HALF_DTYPES else ""
        return None

    def _dtype_name(self, e: ast.AST) -> str | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            # .type("torch.HalfTensor"), .astype("float16"); not a device (.to("cuda"))
            v = e.value
            return (
                v if v.endswith("Tensor") or v.startswith(("float", "int", "uint", "bool", "half")) else None
            )
        qn = self.resolver.qualified_name(e)
        if qn is None or not qn.startswith(("torch.", "numpy.")):
            return None
        tail = qn.rsplit(".", 1)[-1]
        return qn if tail[:1].islower() or tail.endswith("Tensor") else None

    def _first(self, exprs: Iterable[ast.AST]) -> str | None:
        return self.provenance.first_of(exprs, self.half)

    # --- where float16 comes from besides values ---------------------------------------

    def _owner(self, node: ast.AST) -> ast.AST | None:
        """The function whose body holds ``node`` (None at module level)."""
        if not self._function_of:
            for fn in self.flow.functions.values():
                for child in ast.walk(fn.node):
                    if child is not fn.node:
                        self._function_of[id(child)] = fn.node  # inner functions overwrite: walked later
        return self._function_of.get(id(node))

    def _find_regions(self) -> None:
        """Float16 autocast ``with`` blocks and decorated functions, then every in-file function
        they call (transitively): autocast is a thread state, not a lexical one."""
        pending: list[tuple[ast.AST, str]] = []
        for node in ast.walk(self.flow.tree):
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    words = self._autocast_words(item.context_expr)
                    if words is not None:
                        self._regions.append((node.lineno, node.end_lineno or node.lineno, words))
                        pending.append((node, words))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in node.decorator_list:
                    words = self._autocast_words(deco)
                    if words is not None:
                        self._autocast_functions[id(node)] = words
                        pending.append((node, words))
        while pending:
            scope, words = pending.pop()
            for child in ast.walk(scope):
                if not isinstance(child, ast.Call):
                    continue
                callee = self.flow.callee(child)
                targets = [callee] if callee is not None else self._forwards(child)
                for target in targets:
                    if target is not None and id(target) not in self._autocast_functions:
                        self._autocast_functions[id(target)] = words
                        pending.append((target, words))

    def _forwards(self, call: ast.Call) -> list[ast.AST]:
        """The ``forward`` methods a call of an object (``model(x)``) may run: those of the file's
        classes it is an instance of, none for a library module (``self.fc = nn.Linear(...)``),
        and every one the file defines when nothing says what the object is (a parameter)."""
        if (
            self.resolver.qualified_name(call.func) is not None
            or self.ranges.method_receiver(call) is not None
        ):
            return []
        if isinstance(call.func, ast.Attribute) and not self.flow.is_use(call.func):
            return []  # obj.method(...), super().__init__(): a method, not a module's __call__
        classes = self._classes_of(call.func)
        forwards = self.flow.class_methods
        if classes is None:
            return [method for (_, name), method in forwards.items() if name == "forward"]
        return [forwards[(id(c), "forward")] for c in classes if (id(c), "forward") in forwards]

    def _autocast_words(self, e: ast.AST) -> str | None:
        if not isinstance(e, ast.Call):
            return None
        qn = self.resolver.qualified_name(e.func)
        if qn not in _AUTOCAST:
            return None
        keywords = {k.arg: k.value for k in e.keywords if k.arg}
        enabled = keywords.get("enabled")
        if isinstance(enabled, ast.Constant) and enabled.value is False:
            return None
        dtype = keywords.get("dtype")
        if dtype is None and qn == "torch.autocast" and len(e.args) > 1:
            dtype = e.args[1]
        device = keywords.get(
            "device_type", e.args[0] if e.args and qn != "torch.cuda.amp.autocast" else None
        )
        if dtype is not None:
            half = self._dtype_name(dtype) in _HALF_DTYPES
        else:
            # Without a dtype, CUDA autocasts to float16 and the CPU to bfloat16.
            on_cuda = qn == "torch.cuda.amp.autocast" or (
                isinstance(device, ast.Constant) and isinstance(device.value, str) and device.value == "cuda"
            )
            half = on_cuda
        if not half:
            return None
        return f"the float16 autocast region of line {e.lineno}"

    def _find_half_classes(self) -> None:
        """Module classes of the file that a ``.half()`` or ``.to(torch.float16)`` casts."""
        for node, _ in self.flow.operations:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if self._method_cast(node, node.func.attr) in (None, ""):
                continue
            for cls in self._classes_of(node.func.value) or ():
                self._half_classes.setdefault(id(cls), f"{cls.name} cast by {node_words(node, 'a cast')}")

    def _classes_of(self, e: ast.AST, depth: int = 0) -> list[ast.ClassDef] | None:
        """The file's classes an expression may be an instance of (``Net()``, a name or a ``self``
        attribute bound to one); [] when it is something else (``nn.Linear(8, 4)``), None when
        nothing in the file says (a parameter)."""
        if depth > 10:
            return None
        if isinstance(e, ast.Call):
            callee = self.flow.callee(e)
            cls = self.flow.method_class.get(id(callee)) if callee is not None else None
            if cls is not None and getattr(callee, "name", None) == "__init__":
                return [cls]
            if isinstance(e.func, ast.Attribute) and self.resolver.qualified_name(e.func) is None:
                return self._classes_of(e.func.value, depth + 1)  # Net().to(device).half()
            return [
                c for c in self.flow.classes.values() if isinstance(e.func, ast.Name) and c.name == e.func.id
            ]
        if isinstance(e, (ast.Name, ast.Attribute)) and self.flow.is_use(e):
            defs = [d for d in self.flow.defs_reaching(e) if d.how in ("assign", "walrus", "attr")]
            if not defs:
                return None
            found: list[ast.ClassDef] = []
            for d in defs:
                got = self._classes_of(d.value, depth + 1) if d.value is not None else None
                if got is None:
                    return None
                found.extend(got)
            return found
        return None
