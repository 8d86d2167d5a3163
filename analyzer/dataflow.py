"""Dataflow graph of one module: which definitions may reach which uses.

A networkx ``DiGraph`` per module. Nodes:

* ``("def", k)``: a definition (assignment, augmented assignment, tuple
  unpacking, parameter, loop/with target, import, def/class, ``self.x = ...``
  class attribute, in-place mutation); attribute ``info`` holds a ``Def``.
* ``("use", id(node))``: a read of a name (``ast.Name``) or of ``self.x``
  (``ast.Attribute``); edges come from every definition that may reach it.
* ``("arg", id(expr))``: an argument expression passed by an in-file call; edges
  go to the callee's parameter definitions (interprocedural, same file).
* ``("ret", id(func))``: a function's return; edges come from each returned
  expression (``("expr", id(e))``) and go to ``("call", id(call))`` nodes.

Edges also run from the uses and calls inside a value to the definition,
argument or return it feeds, so ``upstream(expr)`` (networkx ancestors) lists
everything that may flow into an expression.

Reaching definitions are flow-sensitive inside one scope (statements in order,
branches merged, a branch that always leaves dropped, loop bodies visited twice
so back edges reach, continue/break environments joined at the loop head and
exit), and flow-insensitive across scopes (a function sees every module-level
definition of a global, a closure every definition in its enclosing function).
Guards add ``refine`` definitions: after ``if d == 0: return``, inside
``if d.min() > 0:``, after ``assert s > 0``, in ``while d > eps:``.
Aliasing through containers or second names is not tracked.

``sources(expr)`` answers the range analysis' question "what may flow into
this expression".
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, Unpack

if TYPE_CHECKING:
    import networkx as nx

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)

Env = dict[str, frozenset[int]]


@dataclass
class Def:
    """One definition of a name (or of a class attribute, for ``how == "attr"``).

    ``value`` depends on ``how``: the assigned expression (``assign``,
    ``unpack``, ``attr``, ``walrus``), the ``AugAssign`` statement (``aug``),
    the default expression or None (``param``), the iterable (``for``), the
    ``FunctionDef``/``ClassDef`` (``function``/``class``), the assigned value
    or the in-place call (``mutate``), the guard expression (``refine``, with
    ``truth``), None otherwise. ``path`` locates a name inside a
    tuple target; ``qualified`` is the imported name for ``import``.
    """

    key: int
    name: str
    how: str
    value: ast.AST | None
    node: ast.AST
    path: tuple[int, ...] = ()
    qualified: str | None = None
    owner: ast.AST | None = None  # the function a parameter belongs to
    param_index: int = -1  # position among the function's parameters
    annotation: ast.expr | None = None
    # for how == "refine": the guard (``value``) is known to be this truth value here
    truth: bool = True

    def unpacked(self) -> tuple[ast.AST | None, bool]:
        """For an ``unpack``: the part of ``value`` that ``path`` names, as far as a literal
        tuple or list spells it out, and whether the whole path was followed (``a, b = x, y``
        gives ``y``; ``rows, cols = torch.where(c)`` stops at the call)."""
        v = self.value
        for i in self.path:
            if not (
                isinstance(v, (ast.Tuple, ast.List))
                and i < len(v.elts)
                and not any(isinstance(x, ast.Starred) for x in v.elts)
            ):
                return v, False
            v = v.elts[i]
        return v, True


class DefExtras(TypedDict, total=False):
    """The optional fields of a Def, as builders pass them by keyword."""

    path: tuple[int, ...]
    qualified: str | None
    owner: ast.AST | None
    param_index: int
    annotation: ast.expr | None
    truth: bool


@dataclass
class Scope:
    node: ast.AST
    kind: str  # "module", "function", "class", "lambda"
    parent: Scope | None
    qualname: str | None
    defs: dict[str, list[int]] = field(default_factory=dict)  # every def of a name in this scope
    class_node: ast.ClassDef | None = None  # for methods: the class whose body defines them
    self_name: str | None = None  # for methods: the first parameter's name
    globals: set[str] = field(default_factory=set)


@dataclass
class FunctionInfo:
    node: ast.AST
    qualname: str
    class_node: ast.ClassDef | None
    params: list[Def]
    callers: list[ast.Call] = field(default_factory=list)
    open_params: bool = False  # some call passes *args / **kwargs: parameters get anything
    # referenced other than by a direct call (a callback, a decorator's argument):
    # callers we cannot see may pass anything
    escapes: bool = False

    def receiving(self, call: ast.Call) -> list[Def]:
        """The parameters a call's positional arguments fill, in order: ``self.m(a)`` or
        ``obj.m(a)`` passes its receiver as the first."""
        if self.class_node is not None and isinstance(call.func, ast.Attribute):
            return self.params[1:]
        return self.params


class DataFlow:
    """The graph and the questions asked of it (built by ``build_dataflow``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        # Adjacency kept in plain dicts while building and querying (networkx's
        # per-edge bookkeeping dominated the build time); ``graph`` materialises
        # the same nodes and edges as a networkx DiGraph on first use.
        self.preds: dict[tuple, dict[tuple, None]] = {}
        self.attrs: dict[tuple, dict[str, object]] = {}
        self._graph: nx.DiGraph | None = None
        # Every call / binary operation / augmented assignment, once, in walk
        # order, with the dotted name of the def/class enclosing it.
        self.operations: list[tuple[ast.AST, str | None]] = []
        # Every ``name.attr`` read (``x.shape``), once: what a name is used as, without a second walk.
        self.name_attributes: list[ast.Attribute] = []
        # Every comparison, once, by id: what a value is compared with (``n % k == 0``).
        self.comparisons: dict[int, ast.Compare] = {}
        # Every f-string, once, by id: the values it formats into text.
        self.fstrings: dict[int, ast.JoinedStr] = {}
        self.defs: list[Def] = []
        self.functions: dict[int, FunctionInfo] = {}  # id(FunctionDef) -> info
        self.classes: dict[int, ast.ClassDef] = {}
        self.class_attrs: dict[tuple[int, str], list[int]] = {}
        self.class_methods: dict[tuple[int, str], ast.AST] = {}
        self.call_targets: dict[int, ast.AST] = {}  # id(Call) -> FunctionDef it calls
        self.enclosing: dict[int, str | None] = {}  # id(FunctionDef/ClassDef) -> dotted name
        self.method_class: dict[int, ast.ClassDef] = {}  # id(FunctionDef) -> class it is a method of
        self.self_names: dict[int, str] = {}  # id(method) -> name of its self parameter
        self._parent_scope: dict[int, Scope] = {}

    @property
    def graph(self) -> nx.DiGraph:
        """The dataflow graph as a networkx DiGraph (built once, on first use)."""
        if self._graph is None:
            import networkx as nx  # imported on first use: it costs more than a whole analysis

            g = nx.DiGraph()
            for node, attrs in self.attrs.items():
                g.add_node(node, **attrs)
            g.add_edges_from((p, n) for n, ps in self.preds.items() for p in ps)
            self._graph = g
        return self._graph

    def _pred_nodes(self, key: tuple) -> Iterable[tuple]:
        return self.preds.get(key, {}).keys()

    # --- questions ---------------------------------------------------------

    def defs_reaching(self, node: ast.AST) -> list[Def]:
        """Definitions that may reach a use (``ast.Name`` load or ``self.x`` attribute)."""
        return [self.defs[p[1]] for p in self._pred_nodes(("use", id(node))) if p[0] == "def"]

    def is_use(self, node: ast.AST) -> bool:
        return ("use", id(node)) in self.attrs

    def param_arguments(self, d: Def) -> list[ast.expr]:
        """Argument expressions that in-file calls pass to a parameter definition."""
        return self._exprs(p for p in self._pred_nodes(("def", d.key)) if p[0] == "arg")

    def function_info(self, func: ast.AST | None) -> FunctionInfo | None:
        return self.functions.get(id(func)) if func is not None else None

    def private(self, func: ast.AST | None) -> bool:
        """Whether only this file can call a function: a ``_name`` (not a dunder) or one nested in
        another function. A public one may be called from elsewhere with anything."""
        info = self.function_info(func)
        qual = self.enclosing.get(id(func)) if func is not None else None
        if info is None:
            return False
        name = getattr(func, "name", "")
        nested = qual is not None and qual.count(".") > (1 if info.class_node is not None else 0)
        return nested or (name.startswith("_") and not name.startswith("__"))

    def callee(self, call: ast.Call) -> ast.AST | None:
        """The in-file function a call reaches (``__init__`` for a class), or None."""
        return self.call_targets.get(id(call))

    def returns_of(self, func: ast.AST) -> list[ast.expr]:
        return self._exprs(self._pred_nodes(("ret", id(func))))

    def returned(self, call: ast.Call) -> list[ast.expr] | None:
        """What an in-file call may return: its function's return expressions ([] for a class,
        whose call makes an instance); None when the call runs no function of this file."""
        callee = self.callee(call)
        if callee is None:
            return None
        return [] if getattr(callee, "name", None) == "__init__" else self.returns_of(callee)

    def _exprs(self, nodes: Iterable[tuple]) -> list[ast.expr]:
        """The expressions that argument and return nodes carry."""
        return [e for p in nodes if isinstance(e := self.attrs[p]["expr"], ast.expr)]

    def upstream(self, expr: ast.AST) -> list[Def]:
        """Every definition whose value may flow, transitively, into ``expr``
        (through assignments, arguments, returns and class attributes)."""
        import networkx as nx

        g = self.graph
        seen: set[tuple] = set()
        for n in ast.walk(expr):
            for key in (("use", id(n)), ("call", id(n))):
                if key in g and key not in seen:
                    seen.add(key)
                    seen |= nx.ancestors(g, key)
        return sorted((self.defs[k[1]] for k in seen if k[0] == "def"), key=lambda d: d.key)

    def sources(self, expr: ast.AST) -> list[ast.AST | Def]:
        """What may flow into ``expr``: its definitions for a name or ``self.x``, the
        returned expressions for a call of an in-file function, else nothing."""
        if self.is_use(expr):
            return list(self.defs_reaching(expr))
        if isinstance(expr, ast.Call) and id(expr) in self.call_targets:
            return list(self.returns_of(self.call_targets[id(expr)]))
        return []


def build_dataflow(tree: ast.Module) -> DataFlow:
    """Build the dataflow graph of one parsed module."""
    flow = DataFlow(tree)
    _Builder(flow).run()
    return flow


def _declared_names(body: Iterable[ast.stmt]) -> set[str]:
    """Names a function declares ``global``/``nonlocal`` (statements only: cheap)."""
    out: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (*_FUNCS, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(n, name, None)
            if sub:
                stack.extend(sub)
    return out


_REDUCTIONS = frozenset({"min", "amin", "max", "amax", "abs", "all", "any"})


def _guarded_names(part: ast.expr) -> list[ast.Name]:
    """Names a guard constrains: `d > 0`, `d.min() > 0`, `d.abs().min() > 0`, `(d > 0).all()`."""
    if isinstance(part, ast.Call) and not part.args:
        f = part.func
        if isinstance(f, ast.Attribute) and f.attr in ("all", "any"):
            return _guarded_names(f.value)
    if (
        isinstance(part, ast.Call)
        and len(part.args) == 1
        and isinstance(part.func, ast.Attribute)
        and part.func.attr in ("all", "any")
    ):
        return _guarded_names(part.args[0])  # torch.all(d > 0)
    if (
        not isinstance(part, ast.Compare)
        or len(part.ops) != 1
        or not isinstance(part.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE, ast.Eq, ast.NotEq))
    ):
        return []  # `is None`, `in` ... say nothing about a value's range
    out = []
    for side in (part.left, part.comparators[0]):
        while True:
            if isinstance(side, ast.Name):
                out.append(side)
                break
            if (
                isinstance(side, ast.Call)
                and isinstance(side.func, ast.Attribute)
                and side.func.attr in _REDUCTIONS
                and not side.args
                and not side.keywords
            ):
                side = side.func.value  # d.min(), d.abs().min()
            elif (
                isinstance(side, ast.Call)
                and isinstance(side.func, ast.Attribute)
                and side.func.attr in _REDUCTIONS
                and len(side.args) == 1
                and not side.keywords
            ):
                side = side.args[0]  # torch.min(d)
            else:
                break
    return out


def _terminates(body: list[ast.stmt]) -> bool:
    """Whether a block never falls through to the statement after it."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(last, ast.If):
        return _terminates(last.body) and _terminates(last.orelse)
    return False


@dataclass
class _After:
    """A walk marker: handle this in-place call after its sub-expressions."""

    call: ast.Call


class _Builder:
    def __init__(self, flow: DataFlow) -> None:
        self.flow = flow
        self._seen_ops: set[int] = set()
        self._def_for: dict[tuple[int, str, str, bool], int] = {}
        # per enclosing loop: environments at its continue and at its break statements
        self.loops: list[tuple[list[Env], list[Env]]] = []
        self.pending: list[tuple[ast.AST, Scope]] = []  # nested functions to walk after their parent
        self.nonlocal_uses: list[tuple[ast.AST, str, Scope]] = []
        self.calls: list[tuple[ast.Call, Scope]] = []
        self.attr_uses: list[tuple[ast.Attribute, int]] = []

    # --- driver -------------------------------------------------------------

    def run(self) -> None:
        tree = self.flow.tree
        module = Scope(tree, "module", None, None)
        self.module = module
        self._block(tree.body, {}, module)
        # Bodies run after their enclosing scope is complete, so closures and
        # globals see every definition of the enclosing scope.
        while self.pending:
            node, parent = self.pending.pop(0)
            self._function(node, parent)
        for use, name, scope in self.nonlocal_uses:
            if name in scope.defs and name not in scope.globals:
                continue  # a local read before its assignment: unbound, nothing reaches it
            for key in self._lookup_outer(name, scope):
                self._edge(("def", key), ("use", id(use)))
        for attr, cls_id in self.attr_uses:
            for key in self.flow.class_attrs.get((cls_id, attr.attr), []):
                self._edge(("def", key), ("use", id(attr)))
        for call, scope in self.calls:
            self._link_call(call, scope)
        self._mark_escapes()

    def _mark_escapes(self) -> None:
        called = {id(c.func) for c, _ in self.calls}
        for node_key, preds in self.flow.preds.items():
            if node_key[0] != "use" or node_key[1] in called:
                continue
            for p in preds:
                if p[0] == "def" and self.flow.defs[p[1]].how == "function":
                    info = self.flow.functions.get(id(self.flow.defs[p[1]].value))
                    if info is not None:
                        info.escapes = True
        for attr, cls_id in self.attr_uses:
            method = self.flow.class_methods.get((cls_id, attr.attr))
            if method is not None and id(attr) not in called and id(method) in self.flow.functions:
                self.flow.functions[id(method)].escapes = True
        for info in self.flow.functions.values():
            decorators = getattr(info.node, "decorator_list", [])
            if any(
                not (isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")) for d in decorators
            ):
                info.escapes = True

    def _lookup_outer(self, name: str, scope: Scope) -> list[int]:
        s = scope.parent if name not in scope.globals else self.module
        while s is not None:
            if s.kind == "class":  # class bodies are not visible from methods
                s = s.parent
                continue
            if name in s.defs or s.kind == "module":
                return s.defs.get(name, [])
            s = s.parent
        return []

    # --- definitions ----------------------------------------------------------

    def _new_def(
        self,
        scope: Scope,
        name: str,
        how: str,
        value: ast.AST | None,
        node: ast.AST,
        deps: list[tuple] | None = None,
        **kw: Unpack[DefExtras],
    ) -> int:
        ident = (id(node), name, how, bool(kw.get("truth", True)))
        key = self._def_for.get(ident)
        if key is None:  # a loop body is walked twice: one definition per statement
            key = len(self.flow.defs)
            d = Def(key, name, how, value, node, **kw)
            self.flow.defs.append(d)
            self._def_for[ident] = key
            self._node(("def", key), info=d)
            target = self.module if name in scope.globals else scope
            target.defs.setdefault(name, []).append(key)
        for dep in deps or ():
            self._edge(dep, ("def", key))  # the value depends on these uses and calls
        return key

    def _bind(
        self,
        target: ast.AST,
        env: Env,
        scope: Scope,
        how: str,
        value: ast.AST | None,
        path: tuple[int, ...] = (),
        deps: list[tuple] | None = None,
    ) -> None:
        if isinstance(target, ast.Name):
            kind = how if not path or how == "for" else "unpack"  # a loop target keeps "for"
            key = self._new_def(scope, target.id, kind, value, target, deps, path=path)
            env[target.id] = frozenset({key})
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self._bind(elt.value, env, scope, "unknown", None)
                else:
                    self._bind(elt, env, scope, how, value, path + (i,), deps)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, env, scope, "unknown", None)
        elif isinstance(target, ast.Attribute):
            self._expr(target.value, env, scope)
            if (
                scope.class_node is not None
                and isinstance(target.value, ast.Name)
                and target.value.id == scope.self_name
            ):
                key = self._new_def(
                    Scope(target, "attr", None, None),
                    target.attr,
                    "attr" if not path else "unknown",
                    value if not path else None,
                    target,
                    deps,
                )
                self.flow.class_attrs.setdefault((id(scope.class_node), target.attr), []).append(key)
        elif isinstance(target, ast.Subscript):
            self._expr(target, env, scope)
            # `x[i] = v` changes what x holds: a new definition joining old and new values
            base = target.value
            if isinstance(base, ast.Name) and base.id in env:
                key = self._new_def(scope, base.id, "mutate", value, target, deps)
                old = env.get(base.id, frozenset())
                self._link_mutation(key, old, target)
                env[base.id] = frozenset({key})

    def _link_mutation(self, key: int, old: frozenset[int], node: ast.AST) -> None:
        # The previous definitions flow into the mutated one (a synthetic use).
        use = ("use", id(node))
        self._node(use)
        for k in old:
            self._edge(("def", k), use)
        self._edge(use, ("def", key))

    # --- statements -------------------------------------------------------------

    def _block(self, body: list[ast.stmt], env: Env, scope: Scope) -> Env:
        for stmt in body:
            env = self._stmt(stmt, env, scope)
        return env

    @staticmethod
    def _merge(*envs: Env) -> Env:
        out: Env = {}
        for e in envs:
            for k, v in e.items():
                out[k] = out.get(k, frozenset()) | v
        return out

    def _stmt(self, s: ast.stmt, env: Env, scope: Scope) -> Env:
        """The environment after statement ``s``: one method per statement type (``_STATEMENTS``)."""
        handler = _STATEMENTS.get(type(s), _Builder._uses_only)
        return handler(self, s, env, scope)

    def _assign(self, s: ast.Assign, env: Env, scope: Scope) -> Env:
        deps = self._expr(s.value, env, scope)
        for t in s.targets:
            self._bind(t, env, scope, "assign", s.value, deps=deps)
        return env

    def _annotated_assign(self, s: ast.AnnAssign, env: Env, scope: Scope) -> Env:
        if s.value is not None:
            deps = self._expr(s.value, env, scope)
            self._bind(s.target, env, scope, "assign", s.value, deps=deps)
        elif isinstance(s.target, ast.Name):
            env.setdefault(s.target.id, frozenset())
        return env

    def _augmented_assign(self, s: ast.AugAssign, env: Env, scope: Scope) -> Env:
        self._operation(s, scope)
        deps = self._expr(s.value, env, scope)
        t = s.target
        if isinstance(t, ast.Name):
            self._use(t, env, scope)
            key = self._new_def(scope, t.id, "aug", s, t, deps + [("use", id(t))])
            env[t.id] = frozenset({key})
        elif isinstance(t, ast.Attribute):
            self._expr(t, env, scope)
            if (
                scope.class_node is not None
                and isinstance(t.value, ast.Name)
                and t.value.id == scope.self_name
            ):
                key = self._new_def(Scope(t, "attr", None, None), t.attr, "aug", s, t, deps)
                self.flow.class_attrs.setdefault((id(scope.class_node), t.attr), []).append(key)
        else:
            self._bind(t, env, scope, "aug", s, deps=deps)
        return env

    def _expression_statement(self, s: ast.Expr, env: Env, scope: Scope) -> Env:
        self._expr(s.value, env, scope)
        return env

    def _return(self, s: ast.Return, env: Env, scope: Scope) -> Env:
        if s.value is not None:
            deps = self._expr(s.value, env, scope)
            if scope.kind in ("function", "lambda"):
                self._node(("expr", id(s.value)), expr=s.value)
                for dep in deps:
                    self._edge(dep, ("expr", id(s.value)))
                self._edge(("expr", id(s.value)), ("ret", id(scope.node)))
        return env

    def _if(self, s: ast.If, env: Env, scope: Scope) -> Env:
        self._expr(s.test, env, scope)
        a = self._block(s.body, self._refine(s.test, dict(env), scope, True), scope)
        b = self._block(s.orelse, self._refine(s.test, dict(env), scope, False), scope)
        # A branch that always leaves (return/raise/continue/break) does not
        # reach the next statement: `if d == 0: return x` guards what follows.
        if _terminates(s.body) and not _terminates(s.orelse):
            return b
        if _terminates(s.orelse) and not _terminates(s.body):
            return a
        return self._merge(a, b)

    def _for(self, s: ast.For | ast.AsyncFor, env: Env, scope: Scope) -> Env:
        # The body twice: the second pass sees what the first (and its continues) defined.
        deps = self._expr(s.iter, env, scope)
        entry = dict(env)
        first = dict(entry)
        self._bind(s.target, first, scope, "for", s.iter, deps=deps)
        self.loops.append(([], []))  # environments at continue / break statements
        after1 = self._block(s.body, first, scope)
        second = self._merge(entry, after1, *self.loops[-1][0])
        self._bind(s.target, second, scope, "for", s.iter, deps=deps)
        after2 = self._block(s.body, second, scope)
        continues, breaks = self.loops.pop()
        env = self._merge(entry, after1, after2, *continues, *breaks)
        return self._merge(env, self._block(s.orelse, dict(env), scope))

    def _while(self, s: ast.While, env: Env, scope: Scope) -> Env:
        self._expr(s.test, env, scope)
        self.loops.append(([], []))
        after1 = self._block(s.body, self._refine(s.test, dict(env), scope, True), scope)
        second = self._merge(env, after1, *self.loops[-1][0])
        self._expr(s.test, second, scope)
        after2 = self._block(s.body, self._refine(s.test, dict(second), scope, True), scope)
        continues, breaks = self.loops.pop()
        # the loop ends when its test is false (after the body or a continue), or at a break
        done = self._refine(s.test, self._merge(env, after1, after2, *continues), scope, False)
        env = self._merge(done, *breaks)
        return self._merge(env, self._block(s.orelse, dict(env), scope))

    def _with(self, s: ast.With | ast.AsyncWith, env: Env, scope: Scope) -> Env:
        for item in s.items:
            self._expr(item.context_expr, env, scope)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, env, scope, "unknown", None)
        return self._block(s.body, env, scope)

    def _try(self, s: ast.Try | ast.TryStar, env: Env, scope: Scope) -> Env:
        body = self._block(s.body, dict(env), scope)
        anywhere = self._merge(env, body)  # an exception can leave the body at any point
        outs = [self._block(s.orelse, dict(body), scope)]
        for h in s.handlers:
            henv = dict(anywhere)
            if h.type is not None:
                self._expr(h.type, henv, scope)
            if h.name:
                key = self._new_def(scope, h.name, "unknown", None, h)
                henv[h.name] = frozenset({key})
            outs.append(self._block(h.body, henv, scope))
        env = self._merge(*outs)
        if s.finalbody:
            env = self._block(s.finalbody, self._merge(env, anywhere), scope)
        return env

    def _function_def(self, s: ast.FunctionDef | ast.AsyncFunctionDef, env: Env, scope: Scope) -> Env:
        # The body is built later (``pending``), once every name of the enclosing scope is bound.
        for d in s.decorator_list:
            self._expr(d, env, scope)
        for d in s.args.defaults + [k for k in s.args.kw_defaults if k is not None]:
            self._expr(d, env, scope)
        key = self._new_def(scope, s.name, "function", s, s)
        env[s.name] = frozenset({key})
        self.pending.append((s, scope))
        return env

    def _class_def(self, s: ast.ClassDef, env: Env, scope: Scope) -> Env:
        for b in s.bases:
            self._expr(b, env, scope)
        for d in s.decorator_list:
            self._expr(d, env, scope)
        self._class(s, scope)
        key = self._new_def(scope, s.name, "class", s, s)
        env[s.name] = frozenset({key})
        return env

    def _import(self, s: ast.Import, env: Env, scope: Scope) -> Env:
        for a in s.names:
            if a.asname:
                key = self._new_def(scope, a.asname, "import", None, s, qualified=a.name)
                env[a.asname] = frozenset({key})
            else:
                top = a.name.split(".")[0]
                key = self._new_def(scope, top, "import", None, s, qualified=top)
                env[top] = frozenset({key})
        return env

    def _import_from(self, s: ast.ImportFrom, env: Env, scope: Scope) -> Env:
        mod = ("." * s.level) + (s.module or "")
        for a in s.names:
            if a.name == "*":
                continue
            name = a.asname or a.name
            key = self._new_def(scope, name, "import", None, s, qualified=f"{mod}.{a.name}")
            env[name] = frozenset({key})
        return env

    def _match(self, s: ast.Match, env: Env, scope: Scope) -> Env:
        self._expr(s.subject, env, scope)
        outs = [dict(env)]
        for case in s.cases:
            cenv = dict(env)
            for n in ast.walk(case.pattern):
                name = getattr(n, "name", None) or getattr(n, "rest", None)
                if isinstance(name, str):
                    key = self._new_def(scope, name, "unknown", None, n)
                    cenv[name] = frozenset({key})
            if case.guard is not None:
                self._expr(case.guard, cenv, scope)
            outs.append(self._block(case.body, cenv, scope))
        return self._merge(*outs)

    def _loop_exit(self, s: ast.Break | ast.Continue, env: Env, scope: Scope) -> Env:
        # The loop being built merges these environments (see _for, _while).
        if self.loops:
            self.loops[-1][1 if isinstance(s, ast.Break) else 0].append(dict(env))
        return env

    def _assert(self, s: ast.Assert, env: Env, scope: Scope) -> Env:
        self._expr(s.test, env, scope)
        if s.msg is not None:
            self._expr(s.msg, env, scope)
        return self._refine(s.test, env, scope, True)

    def _declaration(self, s: ast.Global | ast.Nonlocal | ast.Pass, env: Env, scope: Scope) -> Env:
        return env

    def _uses_only(self, s: ast.stmt, env: Env, scope: Scope) -> Env:
        """Delete, Raise, ...: only uses."""
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self._expr(child, env, scope)
        return env

    def _refine(self, test: ast.expr, env: Env, scope: Scope, truth: bool) -> Env:
        """Where ``test`` is ``truth``, names it compares get a guarded definition."""
        parts = [test]
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if truth else ast.Or):
            parts = list(test.values)
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._refine(test.operand, env, scope, not truth)
        for part in parts:
            for side in _guarded_names(part):
                if side.id in env and ("use", id(side)) in self.flow.attrs:
                    key = self._new_def(
                        scope, side.id, "refine", test, side, [("use", id(side))], truth=truth
                    )
                    env[side.id] = frozenset({key})
        return env

    def _inplace_call(self, e: ast.expr, env: Env, scope: Scope) -> None:
        """`x.clamp_(...)`, `x.zero_()`, `nn.init.zeros_(x)`: an in-place op redefines x."""
        if not isinstance(e, ast.Call):
            return
        fname = e.func.attr if isinstance(e.func, ast.Attribute) else getattr(e.func, "id", "")
        if not fname.endswith("_") or fname.startswith("_"):
            return
        root: ast.AST = e.func
        while isinstance(root, ast.Attribute):
            root = root.value
        # a module path (torch.nn.init.zeros_) or an imported function, not a value's method
        module_path = isinstance(root, ast.Name) and (
            root.id not in env or all(self.flow.defs[k].how == "import" for k in env[root.id])
        )
        if isinstance(e.func, ast.Attribute) and not module_path:
            if not isinstance(e.func.value, ast.Name):
                return  # f(x).add_(y): a temporary changes
            target = e.func.value  # method form: the receiver changes
        elif module_path and e.args and isinstance(e.args[0], ast.Name):
            target = e.args[0]  # function form: the first argument changes
        else:
            return
        if target.id in env:
            key = self._new_def(scope, target.id, "mutate", e, e)
            self._link_mutation(key, env.get(target.id, frozenset()), target)
            env[target.id] = frozenset({key})

    # --- scopes -----------------------------------------------------------------

    def _class(self, node: ast.ClassDef, parent: Scope) -> None:
        self.flow.classes[id(node)] = node
        qual = f"{parent.qualname}.{node.name}" if parent.qualname else node.name
        self.flow.enclosing[id(node)] = qual
        scope = Scope(node, "class", parent, qual, globals=_declared_names(node.body))
        env: Env = {}
        for stmt in node.body:
            if isinstance(stmt, _FUNCS):
                self.flow.class_methods[(id(node), stmt.name)] = stmt
                self.flow.method_class[id(stmt)] = node
            env = self._stmt(stmt, env, scope)
        # Class-body assignments are class attributes, readable as self.x
        for name, keys in scope.defs.items():
            for k in keys:
                if self.flow.defs[k].how not in ("function", "class", "import"):
                    self.flow.class_attrs.setdefault((id(node), name), []).append(k)

    def _function(self, node: ast.AST, parent: Scope) -> None:
        assert isinstance(node, (*_FUNCS, ast.Lambda))
        args = node.args
        positional = args.posonlyargs + args.args
        body: list[ast.stmt] = node.body if isinstance(node, _FUNCS) else [ast.Return(value=node.body)]
        name = node.name if isinstance(node, _FUNCS) else "<lambda>"
        qual = f"{parent.qualname}.{name}" if parent.qualname else name
        cls = self.flow.method_class.get(id(node)) if parent.kind == "class" else None
        is_static = isinstance(node, _FUNCS) and any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list
        )
        scope = Scope(
            node,
            "function" if isinstance(node, _FUNCS) else "lambda",
            parent,
            qual,
            globals=_declared_names(body),
        )
        if cls is not None and positional and not is_static:
            scope.class_node = cls
            scope.self_name = positional[0].arg
            self.flow.self_names[id(node)] = positional[0].arg
        if isinstance(node, _FUNCS):
            self.flow.enclosing[id(node)] = qual
        env: Env = {}
        params: list[Def] = []
        n_pos = len(positional)
        defaults: list[ast.expr | None] = [None] * (n_pos - len(args.defaults)) + list(args.defaults)
        for i, p in enumerate(positional):
            key = self._new_def(
                scope, p.arg, "param", defaults[i], p, owner=node, param_index=i, annotation=p.annotation
            )
            params.append(self.flow.defs[key])
            env[p.arg] = frozenset({key})
        for p, d in zip(args.kwonlyargs, args.kw_defaults):
            key = self._new_def(
                scope, p.arg, "param", d, p, owner=node, param_index=-1, annotation=p.annotation
            )
            params.append(self.flow.defs[key])
            env[p.arg] = frozenset({key})
        for p in (args.vararg, args.kwarg):
            if p is not None:
                key = self._new_def(scope, p.arg, "unknown", None, p)
                env[p.arg] = frozenset({key})
        self.flow.functions[id(node)] = FunctionInfo(node, qual, cls, params)
        # Make the parent scope of a function discoverable (for enclosing names of sites)
        self._block(body, env, scope)

    # --- expressions --------------------------------------------------------------

    def _use(self, n: ast.Name, env: Env, scope: Scope) -> None:
        key = ("use", id(n))
        self._node(key)
        if n.id in env:
            for k in env[n.id]:
                self._edge(("def", k), key)
        elif scope.kind != "module":
            # Local or not is only known once the whole scope is walked: decided in run().
            self.nonlocal_uses.append((n, n.id, scope))

    def _expr(self, e: ast.AST, env: Env, scope: Scope) -> list[tuple]:
        """Record the uses, calls and in-place redefinitions in an expression; return
        the graph nodes (uses, calls) its value depends on."""
        deps: list[tuple] = []
        stack: list[ast.AST | _After] = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, _After):
                self._inplace_call(n.call, env, scope)
                continue
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    self._use(n, env, scope)
                    deps.append(("use", id(n)))
                continue
            if isinstance(n, ast.Lambda):
                for d in n.args.defaults:
                    stack.append(d)
                self.pending.append((n, scope))
                continue
            if isinstance(n, ast.Compare):
                self.flow.comparisons[id(n)] = n
            elif isinstance(n, ast.JoinedStr):
                self.flow.fstrings[id(n)] = n
            if isinstance(n, _COMPS):
                deps.extend(self._comprehension(n, env, scope))
                continue
            if isinstance(n, ast.NamedExpr):
                inner = self._expr(n.value, env, scope)
                key = self._new_def(scope, n.target.id, "walrus", n.value, n.target, inner)
                env[n.target.id] = frozenset({key})
                deps.append(("def", key))
                continue
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                if isinstance(n.value, ast.Name):
                    self.flow.name_attributes.append(n)
                if (
                    scope.class_node is not None
                    and isinstance(n.value, ast.Name)
                    and n.value.id == scope.self_name
                ):
                    self._node(("use", id(n)))
                    self.attr_uses.append((n, id(scope.class_node)))
                    deps.append(("use", id(n)))
            if isinstance(n, ast.Call):
                if id(n) not in self._seen_ops:
                    self.calls.append((n, scope))
                self._operation(n, scope)
                deps.append(("call", id(n)))
                fname = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                if fname.endswith("_"):
                    stack.append(_After(n))  # redefine the mutated name once the operands are read
            elif isinstance(n, ast.BinOp):
                self._operation(n, scope)
            stack.extend(ast.iter_child_nodes(n))
        return deps

    def _comprehension(
        self, n: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, env: Env, scope: Scope
    ) -> list[tuple]:
        inner = dict(env)
        deps: list[tuple] = []
        for i, gen in enumerate(n.generators):
            deps += self._expr(gen.iter, inner if i else env, scope)
            self._bind_comp(gen.target, inner, scope, gen.iter)
            for cond in gen.ifs:
                deps += self._expr(cond, inner, scope)
        if isinstance(n, ast.DictComp):
            deps += self._expr(n.key, inner, scope)
            deps += self._expr(n.value, inner, scope)
        else:
            deps += self._expr(n.elt, inner, scope)
        # walrus targets inside a comprehension bind in the enclosing scope
        for k, v in inner.items():
            if k not in env and any(self.flow.defs[d].how == "walrus" for d in v):
                env[k] = v
        return deps

    def _bind_comp(self, target: ast.AST, env: Env, scope: Scope, iterable: ast.expr) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                key = len(self.flow.defs)
                d = Def(key, n.id, "for" if n is target else "unknown", iterable if n is target else None, n)
                self.flow.defs.append(d)
                self._node(("def", key), info=d)
                env[n.id] = frozenset({key})

    # --- calls within the file -----------------------------------------------------

    def _resolve_callee(self, call: ast.Call, scope: Scope) -> tuple[ast.AST | None, bool]:
        """The FunctionDef a call reaches and whether its first parameter is bound (self)."""
        f = call.func
        if isinstance(f, ast.Name):
            defs = self.flow.defs_reaching(f)
            targets = {id(d.value): d for d in defs if d.how in ("function", "class")}
            if len(targets) != 1 or len(defs) != 1:
                return None, False
            d = defs[0]
            if d.how == "function":
                return d.value, False
            init = self.flow.class_methods.get((id(d.value), "__init__"))
            return init, True
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and scope.class_node is not None
            and f.value.id == scope.self_name
        ):
            m = self.flow.class_methods.get((id(scope.class_node), f.attr))
            if m is not None:
                return m, not any(
                    isinstance(d, ast.Name) and d.id == "staticmethod"
                    for d in getattr(m, "decorator_list", [])
                )
        return None, False

    def _link_call(self, call: ast.Call, scope: Scope) -> None:
        callee, bound = self._resolve_callee(call, scope)
        if callee is None:
            return
        info = self.flow.functions.get(id(callee))
        if info is None:
            return
        self.flow.call_targets[id(call)] = callee
        info.callers.append(call)
        self._edge(("ret", id(callee)), ("call", id(call)))
        positional = [p for p in info.params if p.param_index >= 0]
        offset = 1 if bound else 0
        by_name = {p.name: p for p in info.params}
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                info.open_params = True
                break
            j = i + offset
            if j < len(positional):
                self._arg_edge(a, positional[j])
        for kw in call.keywords:
            if kw.arg is None:
                info.open_params = True
            elif kw.arg in by_name:
                self._arg_edge(kw.value, by_name[kw.arg])

    def _arg_edge(self, expr: ast.expr, param: Def) -> None:
        self._node(("arg", id(expr)), expr=expr)
        self._edge(("arg", id(expr)), ("def", param.key))
        for n in ast.walk(expr):  # the argument's own dependencies
            if isinstance(n, ast.Call):
                self._edge(("call", id(n)), ("arg", id(expr)))
            elif ("use", id(n)) in self.flow.attrs:
                self._edge(("use", id(n)), ("arg", id(expr)))

    # --- graph primitives ----------------------------------------------------------

    def _node(self, key: tuple, **attrs: object) -> None:
        got = self.flow.attrs.get(key)
        if got is None:
            self.flow.attrs[key] = dict(attrs)
        elif attrs:
            got.update(attrs)

    def _edge(self, a: tuple, b: tuple) -> None:
        if a not in self.flow.attrs:
            self.flow.attrs[a] = {}
        if b not in self.flow.attrs:
            self.flow.attrs[b] = {}
        self.flow.preds.setdefault(b, {})[a] = None

    def _operation(self, n: ast.AST, scope: Scope) -> None:
        if id(n) not in self._seen_ops:  # loop bodies are walked twice
            self._seen_ops.add(id(n))
            s: Scope | None = scope
            while s is not None and s.kind == "lambda":
                s = s.parent
            self.flow.operations.append((n, s.qualname if s is not None else None))


# Statement type -> the _Builder method that handles it (any other: _uses_only).
_STATEMENTS: dict[type[ast.stmt], Callable[..., Env]] = {
    ast.Assign: _Builder._assign,
    ast.AnnAssign: _Builder._annotated_assign,
    ast.AugAssign: _Builder._augmented_assign,
    ast.Expr: _Builder._expression_statement,
    ast.Return: _Builder._return,
    ast.If: _Builder._if,
    ast.For: _Builder._for,
    ast.AsyncFor: _Builder._for,
    ast.While: _Builder._while,
    ast.With: _Builder._with,
    ast.AsyncWith: _Builder._with,
    ast.Try: _Builder._try,
    ast.TryStar: _Builder._try,
    ast.FunctionDef: _Builder._function_def,
    ast.AsyncFunctionDef: _Builder._function_def,
    ast.ClassDef: _Builder._class_def,
    ast.Import: _Builder._import,
    ast.ImportFrom: _Builder._import_from,
    ast.Match: _Builder._match,
    ast.Break: _Builder._loop_exit,
    ast.Continue: _Builder._loop_exit,
    ast.Assert: _Builder._assert,
    ast.Global: _Builder._declaration,
    ast.Nonlocal: _Builder._declaration,
    ast.Pass: _Builder._declaration,
}
