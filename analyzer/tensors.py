"""May a value be a torch tensor or a numpy array (or numpy scalar) at all?

The question an operator site hangs on: ``a / b`` on Python numbers raises ``ZeroDivisionError``,
``pathlib.Path / name`` is a path, and only arithmetic on an array is silently NaN/INF. The answer
is positive evidence, never a default: a value is an array only when it comes from something that
makes one:

* torch and numpy calls whose declared return type is an array (``array_api.py``, generated from
  the libraries' own stubs), Tensor methods, ``nn.Module`` calls (``self.fc(x)``, ``model(x)``),
  ``Parameter``s and buffers, items of datasets and loaders;
* ``forward`` (and a Lightning ``training_step``) of a module class, whose callers pass tensors;
  parameters that in-file callers (``functools.partial`` included) pass arrays to, or that the
  body uses as an array (``x.shape``, ``x.exp()``, ``torch.log(x)``, an argument of an in-file
  function that does), or that are annotated so;
* what flows from those: names through their reaching definitions, ``self.`` attributes, returns of
  in-file functions, arithmetic, indexing, calls of unknown functions given an array.

An array made only from Python values by deterministic factories and arithmetic
(``torch.linspace(0, T, steps)``, ``torch.cos(t) ** 2``, a noise schedule, a position encoding) is
``CONSTANT``: the same on every run, fixed by the program's settings, never moved by data, inputs or
training (``torch.randn`` and anything from a parameter or a loader is ``ARRAY``).

Everything else is ``SCALAR`` (known not to be an array: literals, ``len``, ``range``, ``math``,
``.item()``, ``.size(i)``, paths, strings, a constructor's hyper-parameters) or ``UNKNOWN`` (a parameter of a function nobody in the
file calls, an attribute of an object from elsewhere): neither is reported as a tensor operation.
``MAKER`` is a value whose calls, items or iteration give arrays (a module, a loader, a dataset, a
list of tensors) without being an array itself.

On demand and memoised per expression; a cycle through a loop is cut optimistically, as the range
analysis does for its Python types.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from grist_lsp.analyzer.array_api import (
    ARRAY_FIRST,
    NDARRAY_METHODS,
    PYTHON_FUNCTIONS,
    PYTHON_METHODS,
    TENSOR_METHODS,
)
from grist_lsp.analyzer.buffers import registered_buffers
from grist_lsp.analyzer.dataflow import DataFlow, Def, FunctionInfo
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.transfers import number_arguments

_A = TypeVar("_A")
MAX_DEPTH = 60


class Origin(enum.IntEnum):
    """What a value may be. A join is the maximum (``CYCLE`` is neutral), except that a
    ``CONSTANT`` array joined with a value of unknown origin may be any array (``join``)."""

    CYCLE = 0
    SCALAR = 1
    CONSTANT = 2
    UNKNOWN = 3
    MAKER = 4
    ARRAY = 5


_ARRAYS = (Origin.ARRAY, Origin.CONSTANT)
# A helper is evaluated again for one call's arguments only when its body is this small (memo keys:
# expressions and definitions): ``extract`` is about 40.
_SMALL_HELPER = 120


def join(origins: Iterable[Origin]) -> Origin:
    got = {o for o in origins if o is not Origin.CYCLE}
    if Origin.CONSTANT in got and got & {Origin.UNKNOWN, Origin.MAKER}:
        return Origin.ARRAY
    return max(got) if got else Origin.CYCLE


def _combine(origins: Iterable[Origin]) -> Origin:
    """An array computed from these: ``CONSTANT`` when each is a constant array or a Python value."""
    got = set(origins)
    return Origin.CONSTANT if got <= {Origin.CONSTANT, Origin.SCALAR, Origin.CYCLE} else Origin.ARRAY


def _passthrough(origins: Iterable[Origin]) -> Origin:
    """What an unknown function makes of its arguments: an array from an array (``rearrange(x)``,
    ``criterion(out, y)``), else nothing known."""
    return Origin.ARRAY if set(origins) & set(_ARRAYS) else Origin.UNKNOWN


# Method names that Python's own types define too: on a receiver of unknown origin they say
# nothing about an array (``line.split()``, ``d.copy()``, ``xs.index(v)``).
_PYTHON_TYPES_METHODS = frozenset(
    name for t in (str, bytes, list, dict, set, tuple, int, float, complex) for name in dir(t)
)
# Tensor methods whose name a non-tensor object would hardly have: the receiver is an array.
_ARRAY_ONLY_METHODS = (
    (TENSOR_METHODS | NDARRAY_METHODS)
    - _PYTHON_TYPES_METHODS
    - {
        "to",  # model.to(device) is a module
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "type",
        "apply",
        "share_memory",
        "requires_grad_",
        "zero_",
        "train",
        "eval",
        "register_hook",
        "fill",
        "put",
        "take",
        "item",
        "dump",
        "dumps",
        "load",
        "save",
    }
)
# Used on a value, these say it is an array though they return none (``loss.backward()``,
# ``loss.item()``): tensor methods returning no tensor, minus what other objects commonly have.
_ARRAY_USE_METHODS = _ARRAY_ONLY_METHODS | (
    (PYTHON_METHODS | {"backward"}) - _PYTHON_TYPES_METHODS - {"size", "dim"}
)
# Used on a value, these say it is a module: calling it gives arrays (``model.train()``).
_MODULE_USE_METHODS = frozenset(
    {"parameters", "named_parameters", "state_dict", "load_state_dict", "zero_grad", "modules", "children"}
)
# Methods whose values are entries of the receiver, wherever the index comes from.
_SELECTIONS = frozenset({"gather", "index_select", "take", "take_along_dim", "masked_select"})
_ARRAY_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad", "weight", "bias"})
_ATTRIBUTES_OF_ARRAYS = frozenset(
    {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "itemsize", "layout", "nbytes"}
)
# Builtins that return a Python value whatever they are given.
_PYTHON_BUILTINS = frozenset(
    {
        "len",
        "int",
        "float",
        "bool",
        "str",
        "range",
        "round",
        "isinstance",
        "hasattr",
        "repr",
        "format",
        "ord",
        "chr",
        "hash",
        "id",
        "type",
        "open",
        "print",
        "callable",
        "issubclass",
        "divmod",
        "dict",
        "set",
        "frozenset",
        "any",
        "all",
    }
)
# Standard-library modules whose functions never return an array.
_PYTHON_MODULES = ("math.", "pathlib.", "os.", "time.", "random.", "json.", "re.", "string.", "datetime.")
_ARRAY_ROOTS = ("torch.", "numpy.")
# The methods of a module class that its callers (``model(x)``, a Lightning trainer) feed tensors;
# its other methods are judged by their in-file callers and uses (``estimate_mfu(self, n, dt)``
# is fed numbers).
_FED_METHODS = frozenset({"forward", "__call__", "training_step", "validation_step", "test_step"})
# The namespaces whose functions make arrays (torch.cuda.device_count, torch.hub.load... do not).
_ARRAY_NAMESPACE_NAMES = (
    "nn.functional",
    "linalg",
    "special",
    "fft",
    "autograd",
    "nn.init",
    "masked",
    "sparse",
    "nested",
    "distributions",
    "random",
    "ma",
    "lib",
    "char",
    "emath",
)


# Torch and numpy functions that make no array (devices, seeds, settings, process groups, saving),
# by prefix: a Python value or an object.
NON_ARRAY_CALLS = (
    "torch.cuda.",
    "torch.backends.",
    "torch.distributed.",
    "torch.optim.",
    "torch.device",
    "torch.manual_seed",
    "torch.set_",
    "torch.get_",
    "torch.is_",
    "torch.no_grad",
    "torch.enable_grad",
    "torch.inference_mode",
    "torch.autocast",
    "torch.finfo",
    "torch.iinfo",
    "torch.Size",
    "torch.save",
    "torch.compile",
    "torch.jit.",
    "torch.nn.init.calculate_gain",
    "torch.utils.data.get_worker_info",
    "numpy.random.seed",
    "numpy.save",
    "numpy.set_printoptions",
    "numpy.finfo",
    "numpy.iinfo",
    "numpy.dtype",
)


def _in_namespaces(qn: str) -> bool:
    root, _, rest = qn.partition(".")
    module = rest.rpartition(".")[0]
    return root in ("torch", "numpy") and (module == "" or module in _ARRAY_NAMESPACE_NAMES)


_MAKER_TORCH = ("torch.utils.data.", "torch.distributions.", "torchvision.", "torchaudio.", "torchtext.")
_RANDOM_WORDS = (
    "rand",
    "normal",
    "bernoulli",
    "multinomial",
    "poisson",
    "uniform",
    "exponential",
    "geometric",
    "cauchy",
    "sample",
    "shuffle",
    "permutation",
    "choice",
    "dropout",
    "gumbel",  # F.gumbel_softmax
    "rrelu",  # a random slope in training
)
# How data enters as an array: never a constant, whatever it is made from.
_DATA_CONVERSIONS = frozenset(
    {"tensor", "as_tensor", "from_numpy", "asarray", "array", "frombuffer", "load", "fromfile"}
)


def _random(name: str) -> bool:
    return any(w in name for w in _RANDOM_WORDS)


# Grids: factories whose arguments are sizes and bounds (Python numbers by their signatures), the
# start of a schedule or a position encoding. zeros/ones/full/empty are not: they make state a
# program fills in, and the engine treats them as inputs.
_SETTINGS_FACTORIES = frozenset({"arange", "linspace", "logspace"})
# Tensor methods whose argument must itself be a tensor (a Python number has no type or shape).
_TAKES_AN_ARRAY = frozenset({"type_as", "expand_as", "view_as", "reshape_as"})
_FILLS = frozenset({"zeros", "ones", "full"})
_ARRAY_CLASSES = frozenset(
    {
        "torch.Tensor",
        "torch.FloatTensor",
        "torch.LongTensor",
        "torch.DoubleTensor",
        "torch.HalfTensor",
        "torch.IntTensor",
        "torch.ByteTensor",
        "torch.BoolTensor",
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.autograd.Variable",
        "torch.autograd.variable.Variable",
        "numpy.ndarray",
    }
)


@dataclass
class ArrayOrigins:
    """On-demand ``Origin``s for the expressions of one module."""

    flow: DataFlow
    resolver: Resolver
    _memo: dict[object, Origin] = field(default_factory=dict)
    _active: set[object] = field(default_factory=set)
    _depth: int = 0
    _used_as: dict[int, Origin] | None = None
    _buffers: dict[str, list[ast.expr | None]] | None = None  # registered_buffers(), once
    _partials: list[ast.Call] | None = None  # the file's functools.partial(f, ...) calls
    _specialisations: dict[tuple[object, ...], Origin] = field(default_factory=dict)
    _bodies: dict[int, frozenset[object]] = field(default_factory=dict)  # id(function) -> keys
    _defs_by_node: dict[int, list[int]] | None = None
    _journal: list[object] | None = None  # memo keys written while a helper is evaluated again

    def may_be_array(self, e: ast.AST) -> bool:
        """True when ``e`` may hold a tensor or a numpy array at run time."""
        return self.origin(e) in _ARRAYS

    def constant(self, e: ast.AST) -> bool:
        """True when ``e`` is an array computed from the program's settings only (``CONSTANT``)."""
        return self.origin(e) is Origin.CONSTANT

    def is_path(self, e: ast.AST) -> bool:
        """A ``pathlib`` path: ``Path(...)``, ``Path.cwd()``, a name bound only to paths, ``p / name``,
        ``p.parent``: its ``/`` joins paths."""
        return self._guarded(("path", id(e)), self._path, e) is Origin.SCALAR

    def _path(self, e: ast.AST) -> Origin:
        no = Origin.UNKNOWN
        if isinstance(e, ast.Call):
            qn = self.resolver.qualified_name(e.func)
            if qn is not None:
                return Origin.SCALAR if qn.startswith("pathlib.") else no
            return self._path(e.func.value) if isinstance(e.func, ast.Attribute) else no
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):
            return Origin.SCALAR if self.is_path(e.left) else no
        if isinstance(e, ast.Attribute) and e.attr in ("parent", "parents"):
            return Origin.SCALAR if self.is_path(e.value) else no
        if isinstance(e, ast.Name) and not self.resolver.qualified_name(e):
            defs = self.flow.defs_reaching(e)
            values = [d.value for d in defs if d.how in ("assign", "attr", "walrus", "param")]
            if defs and len(values) == len(defs) and all(v is not None and self.is_path(v) for v in values):
                return Origin.SCALAR
        return no

    def origin(self, e: ast.AST | None) -> Origin:
        if e is None:
            return Origin.UNKNOWN
        return self._guarded(id(e), self._eval, e)

    def _def(self, d: Def) -> Origin:
        return self._guarded(("def", d.key), self._binding, d)

    def _guarded(self, key: object, compute: Callable[[_A], Origin], arg: _A) -> Origin:
        got = self._memo.get(key)
        if got is not None:
            return got
        if key in self._active or self._depth > MAX_DEPTH:
            return Origin.CYCLE
        self._active.add(key)
        self._depth += 1
        try:
            got = compute(arg)
        except RecursionError:
            return Origin.UNKNOWN
        finally:
            self._depth -= 1
            self._active.discard(key)
        self._memo[key] = got
        if self._journal is not None:
            self._journal.append(key)
        return got

    # --- expressions -------------------------------------------------------------

    def _eval(self, e: ast.AST) -> Origin:
        if isinstance(e, (ast.Constant, ast.JoinedStr, ast.Lambda, ast.Compare)):
            if isinstance(e, ast.Compare):  # x > 0 of a tensor is a bool tensor
                sides = [self.origin(x) for x in [e.left, *e.comparators]]
                if set(sides) & set(_ARRAYS):
                    return _combine(sides)
                return Origin.UNKNOWN if Origin.UNKNOWN in sides else Origin.SCALAR
            return Origin.SCALAR
        if isinstance(e, ast.Tuple):
            return join(self.origin(x) for x in e.elts) if e.elts else Origin.SCALAR
        if isinstance(e, (ast.List, ast.Set)):
            # empty: nothing yet (a bound list is judged by what is appended, in ``_binding``)
            got = join(self.origin(x) for x in e.elts) if e.elts else Origin.SCALAR
            return Origin.MAKER if got in _ARRAYS else got  # a list of tensors
        if isinstance(e, (ast.Dict, ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return Origin.UNKNOWN
        if isinstance(e, ast.Name):
            return self._name(e)
        if isinstance(e, ast.Attribute):
            return self._attribute(e)
        if isinstance(e, ast.Subscript):
            return self._subscript(e)
        if isinstance(e, ast.UnaryOp):
            return Origin.SCALAR if isinstance(e.op, ast.Not) else self.origin(e.operand)
        if isinstance(e, ast.BinOp):
            return self._with_use(e, self._binop(e.left, e.right))
        if isinstance(e, ast.BoolOp):
            return join(self.origin(v) for v in e.values)
        if isinstance(e, ast.IfExp):
            return join([self.origin(e.body), self.origin(e.orelse)])
        if isinstance(e, ast.NamedExpr):
            return self.origin(e.value)
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.Starred):
            return self.origin(e.value)
        if isinstance(e, ast.Slice):
            parts = [p for p in (e.lower, e.upper, e.step) if p is not None]
            return join(self.origin(p) for p in parts) if parts else Origin.SCALAR
        return Origin.UNKNOWN

    def _binop(self, left: ast.AST, right: ast.AST) -> Origin:
        a, b = self._operand(left), self._operand(right)
        if a in _ARRAYS or b in _ARRAYS:
            return _combine([a, b])
        if a in (Origin.SCALAR, Origin.CYCLE) and b in (Origin.SCALAR, Origin.CYCLE):
            return join([a, b])
        return Origin.UNKNOWN

    def _operand(self, e: ast.AST) -> Origin:
        """An arithmetic operand's origin; a fill made on the spot (``res + torch.zeros(shape)``, the
        broadcasting idiom) is bound to no name, so nothing fills it in or trains it: a constant."""
        if isinstance(e, ast.Call) and not any(k.arg == "requires_grad" for k in e.keywords):
            qn = self.resolver.qualified_name(e.func)
            if qn is not None and qn.startswith(_ARRAY_ROOTS) and qn.rsplit(".", 1)[-1] in _FILLS:
                sizes = [self.origin(a) for a in [*e.args, *(k.value for k in e.keywords)]]
                if all(o in (Origin.SCALAR, Origin.UNKNOWN, Origin.CYCLE) for o in sizes):
                    return Origin.CONSTANT
        return self.origin(e)

    def _name(self, e: ast.Name) -> Origin:
        qn = self.resolver.qualified_name(e)
        if qn is not None:
            return Origin.SCALAR  # a module, an imported function or constant, a builtin
        defs = self.flow.defs_reaching(e)
        return join(self._def(d) for d in defs) if defs else Origin.UNKNOWN

    def _attribute(self, e: ast.Attribute) -> Origin:
        if self.resolver.qualified_name(e) is not None:
            return Origin.SCALAR  # math.pi, torch.float32, np.inf
        if e.attr in _ATTRIBUTES_OF_ARRAYS:
            return Origin.SCALAR
        if self.flow.is_use(e):  # self.x: every assignment in the class
            defs = self.flow.defs_reaching(e)
            if defs:
                return join(self._def(d) for d in defs)
            if self._buffers is None:
                self._buffers = registered_buffers(self.flow)
            values = self._buffers.get(e.attr)
            if values is not None:
                return self._buffer(values)
        elif isinstance(e.ctx, ast.Store):  # self.total /= d: what self.total is assigned anywhere
            assigned = [d for d in self.flow.defs if d.how == "attr" and d.name == e.attr]
            if assigned:
                return join(self._def(d) for d in assigned)
        base = self.origin(e.value)
        if e.attr in _ARRAY_ATTRIBUTES and base is Origin.CONSTANT:
            return base
        if e.attr in _ARRAY_ATTRIBUTES and base in (Origin.ARRAY, Origin.MAKER, Origin.UNKNOWN):
            return Origin.ARRAY  # x.data, x.T, self.fc.weight
        if base is Origin.MAKER and e.attr in ("dataset", "module"):
            return Origin.MAKER
        return Origin.UNKNOWN

    def _subscript(self, e: ast.Subscript) -> Origin:
        if isinstance(e.value, ast.Dict):  # {"a": (x, y), ...}[key]: one of the values
            return join(self.origin(v) for v in e.value.values)
        base = self.origin(e.value)
        if base is Origin.CONSTANT:
            # a lookup in a fixed table (``alphas_cumprod[t]`` with ``t`` sampled): whatever the
            # index, the values are the table's, fixed by the program's settings
            return base
        if base in (Origin.ARRAY, Origin.MAKER):
            return Origin.ARRAY  # x[0], dataset[i], tensors[k]
        return base if base is Origin.SCALAR else Origin.UNKNOWN

    # --- calls ---------------------------------------------------------------------

    def _with_use(self, e: ast.AST, got: Origin) -> Origin:
        """``got`` raised by what the program does with ``e``'s value (``_uses``): fed to what takes
        a tensor (``torch.log(w / a)``, ``loss = f(out, y); loss.backward()``), an array; used as a
        module (``m = build(); m.train()``), a module when nothing else is known."""
        used = self._uses().get(id(e))
        if used is Origin.ARRAY and got not in _ARRAYS:
            return used
        if used is Origin.MAKER and got in (Origin.UNKNOWN, Origin.CYCLE):
            return used
        return got

    def _call(self, e: ast.Call) -> Origin:
        return self._with_use(e, self._made_by_call(e))

    def _made_by_call(self, e: ast.Call) -> Origin:
        qn = self.resolver.qualified_name(e.func)
        if qn is not None:
            return self._library_call(qn, e)
        callee = self.flow.callee(e)
        if callee is not None:
            return self._in_file_call(callee, e)
        args = [self.origin(a) for a in [*e.args, *(k.value for k in e.keywords)]]
        if isinstance(e.func, ast.Attribute):
            return self._method_call(e.func, args)
        functions = self._bound_functions(e.func)
        if functions:  # schedule_fn(T) with schedule_fn = one of this file's functions
            return join(self._returns(f) for f in functions)
        called = self.origin(e.func)
        if called in (Origin.MAKER, Origin.ARRAY, Origin.CONSTANT):
            return Origin.ARRAY  # model(x), criterion(out, y)
        return _passthrough(args)

    def _bound_functions(self, f: ast.AST) -> list[ast.AST]:
        """The in-file functions a name is bound to when every definition binds one."""
        if not isinstance(f, ast.Name):
            return []
        found = []
        for d in self.flow.defs_reaching(f):
            target = d.value if d.how in ("assign", "walrus") else None
            funcs = self.flow.defs_reaching(target) if isinstance(target, ast.Name) else []
            if len(funcs) != 1 or funcs[0].how != "function" or funcs[0].value is None:
                return []
            found.append(funcs[0].value)
        return found

    def _library_call(self, qn: str, e: ast.Call) -> Origin:
        short = qn.rsplit(".", 1)[-1]
        args = [*e.args, *(k.value for k in e.keywords)]
        if qn.startswith("builtins."):
            if short in _PYTHON_BUILTINS:
                return Origin.SCALAR
            if short == "enumerate":
                return self.origin(e.args[0]) if e.args else Origin.UNKNOWN
            origins = [self.origin(a) for a in args]
            if short in ("list", "tuple", "iter", "sorted", "reversed", "zip", "next", "filter", "map"):
                return join(origins) if origins else Origin.SCALAR
            if origins and all(o in (Origin.SCALAR, Origin.CYCLE) for o in origins):
                return Origin.SCALAR  # max(1, n), abs(d), sum of numbers
            return _passthrough(origins)
        if qn.startswith(_PYTHON_MODULES) or qn.startswith(NON_ARRAY_CALLS):
            return Origin.SCALAR
        if qn in _ARRAY_CLASSES:
            return Origin.ARRAY
        if qn.startswith(_ARRAY_ROOTS) and not _in_namespaces(qn) and not short[:1].isupper():
            return _passthrough(self.origin(a) for a in args)  # torch.accelerator.device_count()
        if qn.startswith(_ARRAY_ROOTS):
            if short in PYTHON_FUNCTIONS and qn.startswith("torch."):
                return Origin.SCALAR
            if short[:1].isupper():
                return Origin.MAKER  # nn.Linear(...), DataLoader(...), Normal(...)
            # torch.zeros, F.softmax, np.log (numpy scalars too); constant when made of settings
            return self._made_of(qn, short, args, e.keywords)
        if qn.startswith(_MAKER_TORCH) or short[:1].isupper():
            return Origin.MAKER  # a dataset, a transform, a third-party module class
        return _passthrough(self.origin(a) for a in args)

    def _made_of(self, qn: str, short: str, args: list[ast.expr], keywords: list[ast.keyword]) -> Origin:
        """A library array from ``args``: ``CONSTANT`` when deterministic and made of settings (an
        argument of unknown origin passed to a factory such as ``linspace(0, T, n)`` is a number)."""
        if short in ("tensor", "as_tensor", "asarray", "array") and args and self._setting_number(args[0]):
            return Origin.CONSTANT  # torch.tensor(start / tau): one number of the settings
        if _random(short) or qn.startswith("numpy.random."):
            return Origin.ARRAY  # samples
        if qn.startswith("torch.nn.") and not qn.startswith("torch.nn.functional."):
            return Origin.ARRAY  # nn.init fills a weight, nn.utils measures gradients
        origins = [self.origin(a) for a in args]
        if short in _DATA_CONVERSIONS:
            empty = bool(args) and isinstance(args[0], (ast.List, ast.Tuple)) and not args[0].elts
            if empty or (args and origins[0] is Origin.CONSTANT):
                return Origin.CONSTANT  # np.array([]), from_numpy(schedule): no data, or a fixed table
            return Origin.ARRAY  # the program's data coming in (torch.tensor(rows))
        if any(k.arg == "requires_grad" for k in keywords):
            return Origin.ARRAY  # a weight
        if short in _SETTINGS_FACTORIES:
            return _combine(Origin.SCALAR if o is Origin.UNKNOWN else o for o in origins)
        if Origin.UNKNOWN in origins or not set(origins) & set(_ARRAYS):
            return Origin.ARRAY  # torch.tensor(data), from_numpy(a): the program's data comes in
        return _combine(origins)

    def _setting_number(self, e: ast.AST) -> bool:
        """A Python number computed from names and literals (``start / tau``, ``dim_head ** -0.5``),
        not a literal list or row of values standing in for data."""
        if isinstance(e, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.Constant, ast.JoinedStr)):
            return False
        return self.origin(e) is Origin.SCALAR

    def _in_file_call(self, callee: ast.AST, e: ast.Call) -> Origin:
        if isinstance(callee, ast.ClassDef) or getattr(callee, "name", None) == "__init__":
            cls = callee if isinstance(callee, ast.ClassDef) else self.flow.method_class.get(id(callee))
            return Origin.MAKER if cls is None or self._maker_class(cls) else Origin.SCALAR
        returns = self.flow.returns_of(callee)
        passed = self._passed_through(callee, e, returns) if returns else None
        if passed is not None:
            return passed
        got = self._returns(callee)
        if got is Origin.ARRAY and returns:
            return self._specialised(callee, e, returns) or got
        return got

    def _specialised(self, callee: ast.AST, e: ast.Call, returns: list[ast.expr]) -> Origin | None:
        """What a small helper returns for this call's arguments, when it is given a constant table
        (``extract(self.schedule, t, shape)``: ``a.gather(-1, t).reshape(...)``) and returns an
        array for its callers joined (others pass data). The body is evaluated afresh with its
        parameters bound to this call's arguments (the memo's entries it writes are journaled and
        undone); None when not worth it."""
        info = self.flow.function_info(callee)
        arguments = self._arguments(callee, e)
        body = self._body_keys(callee)
        if arguments is None or not body or info is None or info.escapes or self._recursive(callee):
            return None  # a decorated helper runs through its decorator; a recursive one sees itself
        bound = {param.key: self.origin(value) for param, value in arguments}
        if Origin.CONSTANT not in bound.values():
            return None
        memo_key = (id(callee), tuple(sorted(bound.items())))
        known = self._specialisations.get(memo_key)
        if known is not None:
            return known
        # The body's memo entries are set aside and the parameters bound; what the evaluation
        # memoises meanwhile (the body's, and any other function's it reaches) depends on this
        # call's arguments, so it is journaled and undone.
        saved = {k: self._memo.pop(k) for k in body if k in self._memo}
        self._memo.update((("def", key), origin) for key, origin in bound.items())
        outer_journal, self._journal = self._journal, []
        try:
            got = join(self.origin(r) for r in returns)
        finally:
            for k in (*self._journal, *(("def", key) for key in bound)):
                self._memo.pop(k, None)
            if outer_journal is not None:
                outer_journal += self._journal
            self._journal = outer_journal
            self._memo.update(saved)
        if outer_journal is None:  # inside another re-evaluation it holds for that call only
            self._specialisations[memo_key] = got
        return got

    def _recursive(self, callee: ast.AST) -> bool:
        """Whether a function calls itself (its re-evaluation would see this call's arguments)."""
        return any(isinstance(n, ast.Call) and self.flow.callee(n) is callee for n in ast.walk(callee))

    def _arguments(self, callee: ast.AST, e: ast.Call) -> list[tuple[Def, ast.expr]] | None:
        """The expression this call gives each parameter of ``callee`` (its default when it gives
        none); None when one is not spelled out (``*args``, ``**kwargs``, a missing argument)."""
        info = self.flow.function_info(callee)
        if info is None or any(isinstance(a, ast.Starred) for a in e.args):
            return None
        if any(k.arg is None for k in e.keywords):
            return None
        params = info.receiving(e)
        keywords = {k.arg: k.value for k in e.keywords}
        found: list[tuple[Def, ast.expr]] = []
        for i, param in enumerate(params):
            value = keywords.get(param.name) or (e.args[i] if i < len(e.args) else param.value)
            if not isinstance(value, ast.expr):
                return None
            found.append((param, value))
        return found

    def _body_keys(self, callee: ast.AST) -> frozenset[object]:
        """The memo keys a function's body owns: its expressions and its definitions (parameters
        included); empty for a body larger than ``_SMALL_HELPER`` nodes, which is not evaluated again."""
        keys = self._bodies.get(id(callee))
        if keys is None:
            nodes: set[int] = set()
            for n in ast.walk(callee):
                nodes.add(id(n))
                if len(nodes) > _SMALL_HELPER:
                    self._bodies[id(callee)] = frozenset()
                    return frozenset()
            if self._defs_by_node is None:  # once per file: which definitions each node makes
                self._defs_by_node = {}
                for d in self.flow.defs:
                    self._defs_by_node.setdefault(id(d.node), []).append(d.key)
            info = self.flow.function_info(callee)
            params = {("def", p.key) for p in info.params} if info is not None else set()
            defs = {("def", k) for n in nodes for k in self._defs_by_node.get(n, ())}
            keys = self._bodies[id(callee)] = frozenset(nodes | defs | params)
        return keys

    def _returns(self, func: ast.AST) -> Origin:
        """What an in-file function returns: its return expressions joined (None when it has none)."""
        returns = self.flow.returns_of(func)
        return join(self.origin(r) for r in returns) if returns else Origin.SCALAR

    def _passed_through(self, callee: ast.AST, e: ast.Call, returns: list[ast.expr]) -> Origin | None:
        """For a helper that returns one of its parameters (``default(val, d)``: ``val if
        exists(val) else d``), what this call passes for them; None for any other function."""
        info = self.flow.function_info(callee)
        arguments = self._arguments(callee, e) if info is not None and not info.open_params else None
        if arguments is None:
            return None
        by_name = {param.name: value for param, value in arguments}
        leaves: list[ast.expr] = []
        todo = list(returns)
        while todo:
            r = todo.pop()
            if isinstance(r, ast.IfExp):
                todo += [r.body, r.orelse]
            elif isinstance(r, ast.BoolOp):
                todo += r.values
            elif isinstance(r, ast.Name) and r.id in by_name:
                leaves.append(by_name[r.id])
            else:
                return None
        return join(self.origin(leaf) for leaf in leaves)

    def _method_call(self, f: ast.Attribute, args: list[Origin]) -> Origin:
        receiver = self.origin(f.value)
        name = f.attr
        if receiver in _ARRAYS:
            if name in PYTHON_METHODS:
                return Origin.SCALAR
            if receiver is Origin.CONSTANT and name in _SELECTIONS:
                return receiver  # schedule.gather(-1, t): entries of a fixed table, whatever t is
            if _random(name) or "grad" in name:
                return Origin.ARRAY  # x.uniform_(), w.requires_grad_(): a sample, a weight
            return _combine([receiver, *args])
        methods = [m for (_cls, n), m in self.flow.class_methods.items() if n == name]
        if methods:  # memory.sample(): an instance of a class of this file, its method by name
            return join(self._returns(m) for m in methods)
        if receiver is Origin.SCALAR:
            return Origin.SCALAR  # "a,b".split(","), path.with_suffix(...)
        if receiver is Origin.MAKER:
            if name in ("parameters", "children", "modules", "buffers", "named_parameters", "to", "cuda"):
                return Origin.MAKER
            return _passthrough(args)
        if name in _ARRAY_ONLY_METHODS:
            return Origin.ARRAY  # r.exp(), returns.std(): only an array has them
        if name in PYTHON_METHODS:
            return Origin.SCALAR
        return _passthrough(args)

    def _maker_class(self, cls: ast.ClassDef) -> bool:
        """A class whose instances may be modules or datasets: any base but ``object`` (an
        ``nn.Module``, a ``Dataset``, a class of this file deriving from one, a library base)."""
        return any(not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases)

    def _module_class(self, cls: ast.ClassDef, depth: int = 0) -> bool:
        """An ``nn.Module`` (``LightningModule``...): a base named ``*Module`` or from ``torch.nn``,
        or a class of this file deriving from one. Its methods are fed tensors; a ``Dataset``'s
        ``__getitem__`` is fed an index. A class with a ``forward`` method counts too: its base may
        be a module class of another file (``class GammaVAE(BaseVAE)``)."""
        if cls.bases and (id(cls), "forward") in self.flow.class_methods:
            return True
        for b in cls.bases:
            qn = self.resolver.qualified_name(b) or ""
            text = qn or (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", ""))
            if text.endswith("Module") or qn.startswith("torch.nn."):
                return True
            if isinstance(b, ast.Name) and depth < 8:
                defs = self.flow.defs_reaching(b)
                if len(defs) == 1 and isinstance(defs[0].value, ast.ClassDef):
                    if self._module_class(defs[0].value, depth + 1):
                        return True
        return False

    def _buffer(self, values: list[ast.expr | None]) -> Origin:
        """A buffer registered from the program's settings only (a noise schedule, a position table)
        and never changed in place is ``CONSTANT``; any other buffer, or a parameter, an array."""
        if any(v is None for v in values):
            return Origin.ARRAY
        # What a buffer holds does not depend on where it is read: its values are judged with a
        # fresh depth budget, not what is left of it 50 calls into a sampling loop.
        depth, self._depth = self._depth, 0
        try:
            got = join(self.origin(v) for v in values if v is not None)
        finally:
            self._depth = depth
        return got if got is Origin.CONSTANT else Origin.ARRAY

    # --- definitions ---------------------------------------------------------------

    def _binding(self, d: Def) -> Origin:
        how = d.how
        if how in ("assign", "walrus", "attr"):
            return self._bound(d.value)
        if how == "unpack":
            part, whole = d.unpacked()
            if whole and part is not None:
                return self._bound(part)  # xs, ys = [], []
            returned = self._returned_part(d.value, d.path) if d.value is not None else None
            if returned is not None:
                return returned
            return self._item(self.origin(d.value)) if d.value is not None else Origin.UNKNOWN
        if how == "aug":
            s = d.value
            assert isinstance(s, ast.AugAssign)
            return self._binop(s.target, s.value)
        if how == "param":
            return self._param(d)
        if how == "for":
            return self._loop_item(d.value, d.path)
        if how in ("import", "function", "class"):
            return Origin.SCALAR
        if how in ("mutate", "refine"):
            prior = join(self._def(p) for p in self.flow.defs_reaching(d.node))
            return join([prior, self.origin(d.value)]) if how == "mutate" else prior
        return Origin.UNKNOWN

    def _returned_part(self, value: ast.AST, path: tuple[int, ...], depth: int = 0) -> Origin | None:
        """The part ``path`` names of what an in-file call returns as a tuple (``mean, _, log_var,
        x0 = self.p_mean_variance(x, t)``): that element of each return, not any of them; None
        when a return is not a tuple spelling the part out."""
        for k, i in enumerate(path):
            if (
                isinstance(value, (ast.Tuple, ast.List))
                and i < len(value.elts)
                and not any(isinstance(x, ast.Starred) for x in value.elts)
            ):
                value = value.elts[i]
                continue
            returns = self.flow.returned(value) if isinstance(value, ast.Call) and depth < 4 else None
            if not returns:
                return None
            parts = [self._returned_part(r, path[k:], depth + 1) for r in returns]
            return None if None in parts else join(p for p in parts if p is not None)
        return self.origin(value)

    def _bound(self, value: ast.AST | None) -> Origin:
        """What a name bound to ``value`` holds; a list, dict or set display may be appended to
        anywhere (``rewards = []``, then ``rewards.append(r)``): what it holds is not known."""
        got = self.origin(value)
        if isinstance(value, (ast.List, ast.Dict, ast.Set)) and got is Origin.SCALAR:
            return Origin.UNKNOWN
        return got

    @staticmethod
    def _item(container: Origin) -> Origin:
        """An element of a value: of an array or a maker, an array; of a Python value, a Python value."""
        if container in (Origin.ARRAY, Origin.MAKER):
            return Origin.ARRAY
        return container

    def _loop_item(self, it: ast.AST | None, path: tuple[int, ...], resolved: bool = False) -> Origin:
        sources = [it] if resolved else self.resolver.iterated(it)
        if sources != [it]:
            return join(self._loop_item(x, path, resolved=True) for x in sources)
        if isinstance(it, ast.Call):
            qn = self.resolver.qualified_name(it.func)
            if qn == "builtins.range":
                return Origin.SCALAR
            if qn == "builtins.enumerate" and it.args:
                if path and path[0] == 0:
                    return Origin.SCALAR
                return self._loop_item(it.args[0], path[1:]) if path else Origin.UNKNOWN
            if qn == "builtins.zip" and path and path[0] < len(it.args):
                return self._loop_item(it.args[path[0]], path[1:])
        if isinstance(it, (ast.List, ast.Tuple)) and not path:
            return join(self.origin(x) for x in it.elts) if it.elts else Origin.SCALAR
        got = self.origin(it)
        if got is Origin.UNKNOWN and isinstance(it, ast.Call) and it.args:
            got = self.origin(it.args[0])  # tqdm(loader), iter(loader)
        return self._item(got)

    def _param(self, d: Def) -> Origin:
        declared = self._annotation(d.annotation)
        if declared is not None:
            return declared
        info = self.flow.function_info(d.owner)
        if info is not None and info.class_node is not None and d.param_index == 0:
            return Origin.MAKER if self._maker_class(info.class_node) else Origin.SCALAR  # self
        sources: list[ast.AST] = list(self.flow.param_arguments(d)) + self._partial_arguments(d)
        if d.value is not None:
            sources.append(d.value)
        got = join(self.origin(s) for s in sources) if sources else Origin.UNKNOWN
        if got is Origin.ARRAY or (got is Origin.CONSTANT and self._only_called_here(info, d)):
            return got  # what the callers pass, a constant table too (a use says only "an array")
        used = self._uses().get(d.key)
        if used is not None:
            return used
        name = getattr(d.owner, "name", "")
        if (
            got in (Origin.UNKNOWN, Origin.CYCLE)
            and name == "__init__"
            and info is not None
            and info.class_node
        ):
            return Origin.SCALAR  # a constructor's hyper-parameters (image_size, dim_head, eps)
        if (
            got in (Origin.UNKNOWN, Origin.CYCLE)
            and d.value is None
            and info is not None
            and info.class_node is not None
            and name in _FED_METHODS
            and self._module_class(info.class_node)
        ):
            return Origin.ARRAY  # forward(self, x): what a module's callers feed it
        return got

    def _only_called_here(self, info: FunctionInfo | None, d: Def) -> bool:
        """Whether the in-file calls are all the calls a function gets: a private or nested one that
        is never passed around (a public function may be called from elsewhere with data; its
        in-file calls with a constant table are re-evaluated one by one, ``_specialised``)."""
        if info is None or info.escapes or info.open_params:
            return False
        return self.flow.private(d.owner)

    def _partial_arguments(self, d: Def) -> list[ast.AST]:
        """What ``functools.partial(f, name=value)`` binds to ``f``'s parameter ``d`` in this file."""
        if self._partials is None:  # found once: asking per parameter made a large file quadratic
            self._partials = [
                node
                for node, _function in self.flow.operations
                if isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Name)
                and self.resolver.qualified_name(node.func) == "functools.partial"
            ]
        found: list[ast.AST] = []
        for node in self._partials:
            assert isinstance(node.args[0], ast.Name)
            bound = [x.value for x in self.flow.defs_reaching(node.args[0]) if x.how == "function"]
            if d.owner not in bound:
                continue
            found += [k.value for k in node.keywords if k.arg == d.name]
            if 0 <= d.param_index < len(node.args) - 1:
                found.append(node.args[d.param_index + 1])
        return found

    def _annotation(self, a: ast.expr | None) -> Origin | None:
        if a is None:
            return None
        text = ast.unparse(a)
        if any(w in text for w in ("Tensor", "ndarray", "NDArray", "Parameter")):
            return Origin.ARRAY
        if text in ("int", "float", "bool", "str", "complex", "Path", "pathlib.Path"):
            return Origin.SCALAR
        return None

    def _uses(self) -> dict[int, Origin]:
        """Parameters (by definition key) and arithmetic (by expression id) the body uses as an array (``x.shape``, ``x.exp()``,
        ``torch.log(x)``) or as a Python number (a size, ``range``, a layer width)."""
        if self._used_as is not None:
            return self._used_as
        self._used_as = {}
        for node, _function in self.flow.operations:
            if not isinstance(node, ast.Call):
                continue
            qn = self.resolver.qualified_name(node.func)
            settings = (
                qn is not None
                and qn.startswith(_ARRAY_ROOTS)
                and qn.rsplit(".", 1)[-1] in _SETTINGS_FACTORIES
            )
            if settings or number_arguments(node, qn) is not None:
                for a in node.args:
                    self._mark(a, Origin.SCALAR)
            elif (
                qn is not None
                and qn.startswith("torch.")
                and qn.rsplit(".", 1)[-1] in ARRAY_FIRST
                and node.args
            ):
                self._mark(node.args[0], Origin.ARRAY)
            elif qn in _ARRAY_CLASSES and node.args:  # nn.Parameter(w), Variable(x)
                self._mark(node.args[0], Origin.ARRAY)
            elif (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_buffer"
                and len(node.args) > 1
            ):
                self._mark(node.args[1], Origin.ARRAY)
            elif qn is None and isinstance(node.func, ast.Attribute) and self.flow.callee(node) is None:
                if node.func.attr in _TAKES_AN_ARRAY and node.args:
                    self._mark(node.args[0], Origin.ARRAY)  # x.type_as(labels): labels is a tensor
                if node.func.attr in _ARRAY_USE_METHODS:
                    self._mark(node.func.value, Origin.ARRAY)
                elif node.func.attr in _MODULE_USE_METHODS:
                    self._mark(node.func.value, Origin.MAKER)
        for n in self.flow.name_attributes:
            if n.attr in ("shape", "ndim", "dtype", "device"):
                self._mark(n.value, Origin.ARRAY)
        for _round in range(2):  # f(a) where f's parameter is used as an array: a is one (two calls deep)
            self._mark_passed_arrays()
        return self._used_as

    def _mark_passed_arrays(self) -> None:
        """Marks the arguments of in-file calls whose parameter the callee uses as an array."""
        assert self._used_as is not None
        for node, _function in self.flow.operations:
            if not isinstance(node, ast.Call):
                continue
            info = self.flow.function_info(self.flow.callee(node))
            if info is None or info.open_params:
                continue
            params = info.receiving(node)
            by_name = {p.name: p for p in params}
            pairs = list(zip(node.args, params)) + [
                (k.value, by_name[k.arg]) for k in node.keywords if k.arg in by_name
            ]
            for arg, param in pairs:
                if not isinstance(arg, ast.Starred) and self._used_as.get(param.key) is Origin.ARRAY:
                    self._mark(arg, Origin.ARRAY)

    def _mark(self, e: ast.AST, origin: Origin) -> None:
        """Records a use: on a parameter (by definition key), and, for an array or module use, on
        the arithmetic or call that made the value (by expression id: ``u = w / a; torch.log(u)``,
        ``loss = criterion(out, y); loss.backward()``)."""
        assert self._used_as is not None
        if isinstance(e, ast.Call) and origin in (Origin.ARRAY, Origin.MAKER):
            self._used_as[id(e)] = max(self._used_as.get(id(e), origin), origin)
            return
        if isinstance(e, ast.BinOp) and origin is Origin.ARRAY:
            self._used_as[id(e)] = origin
            return
        if isinstance(e, ast.BinOp):  # arange(dim // 4): dim is a number too
            self._mark(e.left, origin)
            self._mark(e.right, origin)
            return
        if not isinstance(e, ast.Name) or not self.flow.is_use(e):
            return
        for d in self.flow.defs_reaching(e):
            if d.how == "param":
                self._used_as[d.key] = max(self._used_as.get(d.key, origin), origin)
            elif d.how == "assign" and isinstance(d.value, (ast.BinOp, ast.Call)):
                if origin is Origin.ARRAY or (origin is Origin.MAKER and isinstance(d.value, ast.Call)):
                    self._mark(d.value, origin)
