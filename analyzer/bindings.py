"""How the range analysis resolves what a name stands for: names through their reaching
definitions, ``self.`` attributes (every assignment in the class), parameters (their defaults and
the arguments calls in this file pass), loop targets, in-place mutations, imported constants
(``math.pi``) and ``finfo`` attributes.

``Bindings`` belongs to one ``RangeAnalysis`` and asks it for the facts of the expressions a
binding is made of (memoised there).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from grist_lsp.analyzer.catalogue import dtype_limits
from grist_lsp.analyzer.dataflow import DataFlow, Def
from grist_lsp.analyzer.facts import CYCLE, INF, MACHINE_EPS, TOP, Fact, fmt, join
from grist_lsp.analyzer.transfers import WITH_INDICES, number_arguments

if TYPE_CHECKING:
    from grist_lsp.analyzer.ranges import RangeAnalysis

CONSTANTS = {
    "math.pi": math.pi,
    "math.e": math.e,
    "math.tau": math.tau,
    "math.inf": INF,
    "numpy.pi": math.pi,
    "numpy.e": math.e,
    "numpy.inf": INF,
    "torch.pi": math.pi,
    "torch.e": math.e,
    "torch.inf": INF,
}
INT_TYPES = frozenset({"int", "float", "bool"})


@dataclass
class Bindings:
    """The facts of names, attributes and parameters for one ``RangeAnalysis``."""

    ranges: RangeAnalysis
    _scalar_fields: dict[str, tuple[str, tuple[float, float] | None]] | None = field(default=None, repr=False)
    _number_uses: dict[int, tuple[str, bool]] | None = field(default=None, repr=False)

    def name_fact(self, e: ast.Name) -> Fact:
        qn = self.ranges.resolver.qualified_name(e)
        if qn is not None:
            if qn in CONSTANTS:
                return self.ranges._num(CONSTANTS[qn], e.id)
            if qn.startswith("builtins."):
                return Fact(pytype="object")
            return Fact(pytype=_imported_type(qn))
        defs = self.ranges.flow.defs_reaching(e)
        if not defs:
            return TOP
        facts = [self.ranges.def_fact(d) for d in defs]
        return join(facts)

    def binding_fact(self, d: Def) -> Fact:
        how = d.how
        if how in ("assign", "walrus", "attr"):
            if isinstance(d.value, (ast.List, ast.Set, ast.Dict)):
                # a named mutable container may be appended to anywhere: its elements are unknown
                return Fact(pytype="object")
            f = self.ranges.fact(d.value)
            used = self.number_uses().get(d.key) if f.pytype == "unknown" else None
            return replace(f, pytype="num", why=f.why or used[0]) if used is not None else f
        if how == "unpack":
            v = d.value
            if len(d.path) == 1 and _is_shape(v):
                return Fact(0.0, INF, False, "num", "a size")  # B, T, C = x.size()
            part, whole = d.unpacked()
            return self.ranges.fact(part) if whole and part is not None else TOP
        if how == "aug":
            s = d.value
            assert isinstance(s, ast.AugAssign)
            # self.n += 1: the attribute's other definitions are the prior, read optimistically
            # for its type as a loop-carried name is (CYCLE), with no range
            prior = self.ranges.fact(s.target) if isinstance(s.target, ast.Name) else CYCLE
            return self.ranges._binop(prior, s.op, self.ranges.fact(s.value), s)
        if how == "param":
            return self._param(d)
        if how == "for":
            return self._loop_target(d.value, d.path)
        if how == "import":
            return Fact(pytype="module")
        if how in ("function", "class"):
            return Fact(pytype="object")
        if how == "mutate":
            return self._mutation(d)
        if how == "refine":
            assert d.value is not None, "a refine definition holds its guard"
            prior = join([self.ranges.def_fact(p) for p in self.ranges.flow.defs_reaching(d.node)])
            return self.ranges._apply(prior, d.node, d.value, d.truth)
        return TOP

    def _param(self, d: Def) -> Fact:
        f = self._declared_param(d)
        if f.pytype not in ("unknown", "num"):
            return f
        sources = self.ranges.flow.param_arguments(d)
        if f.pytype == "unknown" and sources and all(self.ranges.fact(s).pytype == "num" for s in sources):
            f = f.with_type("num")  # every call in this file passes a number (its range stays open)
        used = self.number_uses().get(d.key)
        if used is None:
            return f
        words, size = used
        if size and not f.known:
            return Fact(0.0, INF, False, "num", words)
        return replace(f, pytype="num", why=f.why or words)

    def number_uses(self) -> dict[int, tuple[str, bool]]:
        """Parameters (by definition key) the function uses as a Python number: as an argument of
        an ``nn`` layer's constructor, a tensor factory's size, ``range``, ``view``/``reshape``;
        with True where the use is a size, which cannot be negative where the program goes on."""
        if self._number_uses is None:
            self._number_uses = {}
            flow, resolver = self.ranges.flow, self.ranges.resolver
            for node, _function in flow.operations:
                if not isinstance(node, ast.Call):
                    continue
                use = number_arguments(node, resolver.qualified_name(node.func))
                if use is None:
                    continue
                callee, size = use
                for a in node.args:
                    if isinstance(a, (ast.Name, ast.Attribute)) and flow.is_use(a):
                        self._note_number_use(a, f"{ast.unparse(a)}, a size of {callee}", size)
            for modulus, count in _loop_count_moduli(flow):
                self._note_number_use(
                    modulus, f"{ast.unparse(modulus)}, the modulus of the loop count {count}", False
                )
        return self._number_uses

    def _note_number_use(self, use: ast.Name | ast.Attribute, words: str, size: bool) -> None:
        """Every parameter, attribute or name binding that reaches ``use`` is a Python number
        (a size when ``size``, which only a parameter's use can say)."""
        assert self._number_uses is not None
        for d in self.ranges.flow.defs_reaching(use):
            if d.how in ("param", "attr", "assign"):
                self._number_uses.setdefault(d.key, (words, size and d.how == "param"))

    def scalar_field(self, attr: str) -> tuple[str, tuple[float, float] | None] | None:
        """Words for an attribute name this module declares a Python number: a class field
        annotated ``int``/``float``/``bool`` (a config dataclass), or an argparse option's
        destination with a numeric ``type``, a counting ``action`` or a numeric default; with
        the class fields' defaults (lowest, highest), when every field of that name has one."""
        if self._scalar_fields is None:
            self._scalar_fields = _declared_scalars(self.ranges.flow)
        return self._scalar_fields.get(attr)

    def _declared_param(self, d: Def) -> Fact:
        info = self.ranges.flow.function_info(d.owner)
        pytype = self._annotation_type(d.annotation)
        if info is None:
            return Fact(pytype=pytype)
        if (
            info.class_node is not None
            and d.param_index == 0
            and self.ranges.flow.self_names.get(id(d.owner)) == d.name
        ):
            tensor_class = any(self._is_tensor_base(b) for b in info.class_node.bases)
            return Fact(pytype="tensor" if tensor_class else "object", why="self")
        if info.open_params or info.escapes:
            return Fact(pytype=pytype)
        sources: list[ast.AST] = list(self.ranges.flow.param_arguments(d))
        name = getattr(d.owner, "name", "<lambda>")
        # Callers outside this file can pass anything to a public function; a
        # private or nested one is only called from here.
        private = self.ranges.flow.private(d.owner) or name == "<lambda>"
        if d.value is not None:
            sources.append(d.value)
        elif not private or not sources:
            return Fact(pytype=pytype)
        f = join([self.ranges.fact(s) for s in sources])
        if pytype != "unknown" and f.pytype == "unknown":
            f = f.with_type(pytype)
        return f

    def _is_tensor_base(self, b: ast.expr) -> bool:
        qn = self.ranges.resolver.qualified_name(b)
        return qn in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter")

    def _annotation_type(self, a: ast.expr | None) -> str:
        if a is None:
            return "unknown"
        if isinstance(a, ast.Name) and a.id in INT_TYPES:
            return "num"
        if isinstance(a, ast.Name) and a.id == "str":
            return "str"
        qn = self.ranges.resolver.qualified_name(a)
        if qn in ("torch.Tensor", "torch.FloatTensor"):
            return "tensor"
        return "unknown"

    def _loop_target(self, it: ast.AST | None, path: tuple[int, ...] = (), resolved: bool = False) -> Fact:
        sources = [it] if resolved else self.ranges.resolver.iterated(it)
        if sources != [it]:
            return join([self._loop_target(x, path, resolved=True) for x in sources])
        qn = self.ranges.resolver.qualified_name(it.func) if isinstance(it, ast.Call) else None
        if path:
            if qn == "builtins.enumerate" and path[0] == 0 and len(path) == 1:
                return Fact(0.0, INF, False, "num", "loop index")
            if qn == "builtins.enumerate" and path[0] == 1 and isinstance(it, ast.Call) and it.args:
                return self._loop_target(it.args[0], path[1:])
            if qn == "builtins.zip" and isinstance(it, ast.Call) and path[0] < len(it.args):
                return self._loop_target(it.args[path[0]], path[1:])
            rows = _literal_rows(it)
            if rows and len(path) == 1 and all(len(e.elts) > path[0] for e in rows):
                return join([self.ranges.fact(e.elts[path[0]]) for e in rows])
            return TOP
        if isinstance(it, ast.Call) and qn == "builtins.range":
            args = [self.ranges.fact(a) for a in it.args]
            if len(args) == 1:
                return Fact(0.0, max(args[0].hi - 1, 0.0), False, "num", "range index")
            if len(args) >= 2:
                lo = min(args[0].lo, args[1].lo)
                hi = max(args[0].hi, args[1].hi)
                return Fact(lo, hi, False, "num", "range index")
            return Fact(pytype="num")
        if isinstance(it, (ast.List, ast.Tuple)):
            return join([self.ranges.fact(x) for x in it.elts]) if it.elts else TOP
        return TOP

    def _mutation(self, d: Def) -> Fact:
        node = d.node
        if isinstance(node, ast.Subscript):
            prior = join([self.ranges.def_fact(p) for p in self.ranges.flow.defs_reaching(node)])
            if _selects_zeros(node, d.name):
                prior = replace(prior, nonzero=True)  # w[w == 0] = 1: no zero is left behind
            return join([prior, self.ranges.fact(d.value)])
        if not isinstance(node, ast.Call):
            return TOP
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == d.name:
            prior = join([self.ranges.def_fact(p) for p in self.ranges.flow.defs_reaching(f.value)])
            name = f.attr[:-1]
            if name == "zero":
                return self.ranges._num(0.0, "zero_()").with_type("tensor")
            if name == "fill":
                return self.ranges._arg_fact(node, 0, "value").with_type("tensor")
            got = self.ranges._known_call(name, prior, node, list(node.args), method=True)
            return got if got is not None else TOP
        if node.args and isinstance(node.args[0], ast.Name) and self.ranges.resolver.qualified_name(f):
            # torch.clamp_(x, min=...), nn.init.zeros_(w): a library function mutating its argument
            prior = join([self.ranges.def_fact(p) for p in self.ranges.flow.defs_reaching(node.args[0])])
            name = (self.ranges.resolver.qualified_name(f) or "").rsplit(".", 1)[-1][:-1]
            got = self.ranges._known_call(name, prior, node, list(node.args[1:]), method=False)
            return got if got is not None else TOP
        return TOP

    def attribute_fact(self, e: ast.Attribute) -> Fact:
        qn = self.ranges.resolver.qualified_name(e)
        if qn is not None:
            if qn in CONSTANTS:
                return self.ranges._num(CONSTANTS[qn], qn.split(".")[-1])
            if qn.startswith("torch.") and qn.split(".")[-1] in (
                "float16",
                "float32",
                "float64",
                "bfloat16",
                "half",
                "double",
                "float",
                "long",
                "int",
            ):
                return Fact(pytype="object", why=qn)
            return Fact(pytype=_imported_type(qn))
        if self.ranges.flow.is_use(e):  # self.ranges.x in a method
            defs = self.ranges.flow.defs_reaching(e)
            if not defs:
                return TOP
            f = join([self.ranges.def_fact(d) for d in defs])
            return f
        if isinstance(e.value, ast.Call) and self.ranges.resolver.qualified_name(e.value.func) in (
            "torch.finfo",
            "numpy.finfo",
        ):
            dtype = self._dtype_arg(e.value)
            if e.attr == "eps":
                v = MACHINE_EPS.get(dtype, MACHINE_EPS["float32"])
                return self.ranges._num(v, f"finfo({dtype}).eps")
            if e.attr in ("tiny", "smallest_normal"):
                return self.ranges._num(dtype_limits(dtype).tiny, f"finfo({dtype}).tiny")
            if e.attr == "max":
                return self.ranges._num(dtype_limits(dtype).max, f"finfo({dtype}).max")
            if e.attr == "min":
                return self.ranges._num(-dtype_limits(dtype).max, f"finfo({dtype}).min")
            return TOP
        if isinstance(e.value, ast.Name):  # ClassName.CONSTANT of a class in this file
            defs = self.ranges.flow.defs_reaching(e.value)
            if len(defs) == 1 and defs[0].how == "class":
                keys = self.ranges.flow.class_attrs.get((id(defs[0].value), e.attr), [])
                return join([self.ranges.def_fact(self.ranges.flow.defs[k]) for k in keys]) if keys else TOP
        if e.attr in ("T", "mT", "H", "mH", "data", "real"):
            return self.ranges.fact(e.value)
        if (
            e.attr == "values"
            and isinstance(e.value, ast.Call)
            and self.ranges._call_short(e.value) in WITH_INDICES
        ):
            return self.ranges._first_input(e.value)
        if e.attr in ("shape", "dtype", "device"):
            return Fact(pytype="object")
        if e.attr in ("ndim", "itemsize"):
            return Fact(0.0, INF, False, "num", e.attr)
        declared = self.scalar_field(e.attr)
        if declared is not None and self.ranges.fact(e.value).pytype not in ("tensor", "module", "str"):
            words, defaults = declared
            if defaults is None:
                return Fact(pytype="num", why=words)
            # a config field's default, as a parameter's default stands for what callers pass
            lo, hi = defaults
            return self.ranges._iv(
                lo, hi, f"{words} = {fmt(lo) if lo == hi else f'{fmt(lo)}..{fmt(hi)}'}", "num"
            )
        if e.attr in _NORM_LAYER_FACTS and self._norm_layer(e.value):  # fuse_conv_and_bn(conv, bn)
            lo, words = _NORM_LAYER_FACTS[e.attr]
            return Fact(lo, INF, lo > 0, "unknown", f"{ast.unparse(e)}, {words}")
        return TOP

    def _norm_layer(self, base: ast.expr) -> bool:
        """A name the file reads a norm layer's running statistics of (``bn.running_var``): its
        ``eps`` is the layer's, not any option's (``args.eps`` may be 0)."""
        return isinstance(base, ast.Name) and any(
            isinstance(n.value, ast.Name)
            and n.value.id == base.id
            and n.attr in ("running_var", "running_mean")
            for n in self.ranges.flow.name_attributes
        )

    def _dtype_arg(self, call: ast.Call) -> str:
        arg = call.args[0] if call.args else None
        qn = self.ranges.resolver.qualified_name(arg) if arg is not None else None
        if qn:
            return dtype_limits(qn).name
        return self.ranges.dtype


def _literal_rows(e: ast.AST | None) -> list[ast.Tuple | ast.List] | None:
    """The rows of a literal list or tuple whose every element is a list or tuple, else None."""
    if not isinstance(e, (ast.List, ast.Tuple)):
        return None
    rows = [r for r in e.elts if isinstance(r, (ast.Tuple, ast.List))]
    return rows if len(rows) == len(e.elts) else None


def _imported_type(qualified: str) -> str:
    """torch/numpy/math names are modules or functions; other imports (``from config
    import EPS``) may be plain numbers, so nothing is known."""
    return "module" if qualified.split(".")[0] in ("torch", "numpy", "math") else "unknown"


def _is_shape(e: ast.AST | None) -> bool:
    """``x.shape`` or ``x.size()``: a tuple of sizes."""
    if isinstance(e, ast.Attribute):
        return e.attr == "shape"
    return (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Attribute)
        and e.func.attr == "size"
        and not e.args
        and not e.keywords
    )


def _declared_scalars(flow: DataFlow) -> dict[str, tuple[str, tuple[float, float] | None]]:
    """Attribute names declared Python numbers in this module (see ``Bindings.scalar_field``)."""
    out: dict[str, tuple[str, tuple[float, float] | None]] = {}
    defaults: dict[str, list[float | None]] = {}
    for stmt in flow.tree.body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        for s in stmt.body:
            if (
                isinstance(s, ast.AnnAssign)
                and isinstance(s.target, ast.Name)
                and isinstance(s.annotation, ast.Name)
                and s.annotation.id in INT_TYPES
            ):
                name = s.target.id
                out.setdefault(name, (f"{stmt.name}.{name}: {s.annotation.id}", None))
                defaults.setdefault(name, []).append(literal_number(s.value))
    for name, values in defaults.items():
        known = [v for v in values if v is not None]
        if known and len(known) == len(values):
            out[name] = (out[name][0], (min(known), max(known)))
    for node, _function in flow.operations:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            option = _numeric_option(node)
            if option is not None:
                out.setdefault(option[0], (option[1], None))
    return out


def _loop_count_moduli(flow: DataFlow) -> Iterator[tuple[ast.Name | ast.Attribute, str]]:
    """``n`` of each ``count % n`` (``if (step + 1) % accum_iter == 0``) where ``count`` is only
    ever a loop's count (``for count in range(...)``, ``for count, batch in enumerate(...)``),
    plus or minus a constant: a Python int's remainder, so ``n`` is a Python int too."""
    for node, _function in flow.operations:
        if not (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mod)
            and isinstance(node.right, (ast.Name, ast.Attribute))
            and flow.is_use(node.right)
        ):
            continue
        count = node.left
        if isinstance(count, ast.BinOp) and isinstance(count.op, (ast.Add, ast.Sub)):
            count = count.left if isinstance(count.right, ast.Constant) else count.right
        if not isinstance(count, ast.Name) or not flow.is_use(count):
            continue
        defs = flow.defs_reaching(count)
        if defs and all(_counts_loop(d) for d in defs):
            yield node.right, count.id


# Attributes every torch.nn normalisation layer has, read on a layer this file does not build
# (fuse_conv_and_bn(conv, bn)): the running variance is a variance, eps the layer's positive
# stabiliser (1e-5 unless the program chose another; 0 would make the layer itself divide by 0).
_NORM_LAYER_FACTS = {
    "running_var": (0.0, "a norm layer's running variance"),
    "eps": (MACHINE_EPS["float64"], "a norm layer's eps"),
}


def _selects_zeros(target: ast.Subscript, name: str) -> bool:
    """Whether an item assignment's index is the mask of the array's own zeros (``w[w == 0]``)."""
    mask = target.slice
    if not (isinstance(mask, ast.Compare) and len(mask.ops) == 1 and isinstance(mask.ops[0], ast.Eq)):
        return False
    sides = [mask.left, mask.comparators[0]]
    named = any(isinstance(x, ast.Name) and x.id == name for x in sides)
    return named and any(isinstance(x, ast.Constant) and x.value == 0 for x in sides)


def _counts_loop(d: Def) -> bool:
    """Whether ``d`` binds a loop's count: the target of ``range()``, or the first of ``enumerate()``."""
    it = d.value
    if d.how != "for" or not isinstance(it, ast.Call) or not isinstance(it.func, ast.Name):
        return False
    return (it.func.id == "range" and d.path == ()) or (it.func.id == "enumerate" and d.path == (0,))


def literal_number(e: ast.AST | None) -> float | None:
    """The value of a numeric literal (``1e-5``, ``-1``, ``+2``), else None."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        v = literal_number(e.operand)
        return None if v is None else -v if isinstance(e.op, ast.USub) else v
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return float(e.value)
    return None


def _numeric_option(call: ast.Call) -> tuple[str, str] | None:
    """(destination, words) of an argparse ``add_argument`` call whose value is a number."""
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    dest_kw = kw.get("dest")
    if isinstance(dest_kw, ast.Constant) and isinstance(dest_kw.value, str):
        dest = dest_kw.value
    elif flags:
        longs = [f for f in flags if f.startswith("--")]
        dest = (longs[0] if longs else flags[0]).lstrip("-").replace("-", "_")
    else:
        return None
    kind, action, default = kw.get("type"), kw.get("action"), kw.get("default")
    numeric = (
        (isinstance(kind, ast.Name) and kind.id in INT_TYPES)
        or (isinstance(action, ast.Constant) and action.value in ("store_true", "store_false", "count"))
        or (
            kind is None
            and isinstance(default, ast.Constant)
            and isinstance(default.value, (int, float))
            and "nargs" not in kw
        )
    )
    return (dest, f"option {flags[0] if flags else dest}, a number") if numeric else None
