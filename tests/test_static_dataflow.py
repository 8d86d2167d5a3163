"""The dataflow graph and name resolution behind the static pass."""

from __future__ import annotations

import ast

import networkx as nx

from grist_lsp.analyzer.dataflow import DataFlow, Def, build_dataflow
from grist_lsp.analyzer.names import Resolver
from grist_lsp.analyzer.parsing import parse


def _flow(src: str) -> tuple[ast.Module, DataFlow]:
    tree = parse(src)
    return tree, build_dataflow(tree)


def _names(tree: ast.AST, ident: str) -> list[ast.Name]:
    """Loads of ``ident`` in source order."""
    out = [
        n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == ident and isinstance(n.ctx, ast.Load)
    ]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _values(defs: list[Def]) -> list[str]:
    return sorted(ast.unparse(d.value) if d.value is not None else f"<{d.how}>" for d in defs)


def test_reaching_definitions_are_flow_sensitive():
    tree, flow = _flow("d = 1\na = d\nd = 2\nb = d\nif c:\n    d = 3\nelse:\n    d = 4\ne = d\n")
    first, second, third = _names(tree, "d")
    assert _values(flow.defs_reaching(first)) == ["1"]
    assert _values(flow.defs_reaching(second)) == ["2"]
    assert _values(flow.defs_reaching(third)) == ["3", "4"]


def test_loop_back_edges_reach_the_loop_body():
    tree, flow = _flow("s = 0\nfor i in range(3):\n    t = s\n    s = s + i\nu = s\n")
    t_use, s_add, u_use = _names(tree, "s")
    assert _values(flow.defs_reaching(t_use)) == ["0", "s + i"]
    assert _values(flow.defs_reaching(u_use)) == ["0", "s + i"]


def test_globals_closures_and_unbound_locals():
    src = (
        "EPS = 1e-8\n"
        "def f(x):\n"
        "    return x + EPS\n"
        "def g(x):\n"
        "    y = EPS\n"
        "    EPS = 2\n"  # EPS is local to g: the read above is unbound
        "    return y\n"
        "def outer():\n"
        "    k = 3\n"
        "    def inner():\n"
        "        return k\n"
        "    k = 4\n"
        "    return inner\n"
    )
    tree, flow = _flow(src)
    in_f, in_g = _names(tree, "EPS")
    assert _values(flow.defs_reaching(in_f)) == ["1e-08"]
    assert flow.defs_reaching(in_g) == []
    (k_use,) = _names(tree, "k")
    assert _values(flow.defs_reaching(k_use)) == ["3", "4"]


def test_tuple_unpacking_augmented_and_mutation():
    tree, flow = _flow("a, (b, c) = 1, (2, 3)\nb += a\nc[0] = 0\nz = b + c\n")
    b_use = [n for n in _names(tree, "b")][-1]
    (d,) = flow.defs_reaching(b_use)
    assert d.how == "aug"
    c_use = _names(tree, "c")[-1]
    (m,) = flow.defs_reaching(c_use)
    assert m.how == "mutate"
    (orig,) = flow.defs_reaching(m.node)  # the mutation joins the previous value
    assert orig.how == "unpack" and orig.path == (1, 1)


def test_class_attributes_from_any_method():
    src = (
        "class M:\n"
        "    eps = 1e-5\n"
        "    def __init__(self, eps=1e-6):\n"
        "        self.eps = eps\n"
        "    def reset(self):\n"
        "        self.eps = 0.0\n"
        "    def forward(self, x):\n"
        "        return x / self.eps\n"
    )
    tree, flow = _flow(src)
    (use,) = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)]
    assert _values(flow.sources(use)) == ["0.0", "1e-05", "eps"]


def test_interprocedural_arguments_and_returns():
    src = (
        "def _helper(v, scale=2.0):\n"
        "    return v * scale\n"
        "class C:\n"
        "    def __init__(self, eps=1e-6):\n"
        "        self.eps = eps\n"
        "    def run(self, x):\n"
        "        return self._norm(x, 3.0)\n"
        "    def _norm(self, y, k):\n"
        "        return y / k\n"
        "r = _helper(1.5, scale=4.0)\n"
        "c = C(eps=1e-3)\n"
    )
    tree, flow = _flow(src)
    helper = tree.body[0]
    info = flow.function_info(helper)
    v, scale = info.params
    assert [ast.unparse(a) for a in flow.param_arguments(v)] == ["1.5"]
    assert [ast.unparse(a) for a in flow.param_arguments(scale)] == ["4.0"]
    call = tree.body[2].value
    assert flow.callee(call) is helper
    assert [ast.unparse(e) for e in flow.sources(call)] == ["v * scale"]
    # self._norm(x, 3.0): bound method, self skipped
    norm = tree.body[1].body[2]
    _, y, k = flow.function_info(norm).params
    assert [ast.unparse(a) for a in flow.param_arguments(k)] == ["3.0"]
    # C(eps=1e-3) reaches __init__
    init = tree.body[1].body[0]
    eps = flow.function_info(init).params[1]
    assert [ast.unparse(a) for a in flow.param_arguments(eps)] == ["0.001"]


def test_graph_is_a_networkx_digraph_with_def_use_edges():
    tree, flow = _flow("def f(p):\n    q = p + 1\n    return q\nz = f(2)\n")
    g = flow.graph
    assert isinstance(g, nx.DiGraph)
    call = tree.body[1].value
    # the argument 2 reaches the call's result through p, q and the return
    assert ("arg", id(call.args[0])) in nx.ancestors(g, ("call", id(call)))
    for node, data in g.nodes(data=True):
        if node[0] == "def":
            assert isinstance(data["info"], Def)


def test_import_aliases_resolve_and_shadowing_is_respected():
    src = (
        "import torch as th\n"
        "import torch.nn.functional as F\n"
        "from torch.nn import functional as G\n"
        "from torch import log\n"
        "import numpy as np, math\n"
        "a = th.special.log1p\n"
        "b = F.softplus\n"
        "c = G.relu\n"
        "d = log\n"
        "e = np.log\n"
        "f = math.sqrt\n"
        "def g(th):\n"
        "    return th.log\n"
        "h = abs\n"
    )
    tree, flow = _flow(src)
    r = Resolver(flow)
    values = {t.targets[0].id: t.value for t in tree.body if isinstance(t, ast.Assign)}
    got = {k: r.qualified_name(v) for k, v in values.items()}
    assert got == {
        "a": "torch.special.log1p",
        "b": "torch.nn.functional.softplus",
        "c": "torch.nn.functional.relu",
        "d": "torch.log",
        "e": "numpy.log",
        "f": "math.sqrt",
        "h": "builtins.abs",
    }
    ret = tree.body[11].body[0].value
    assert r.qualified_name(ret) is None  # the parameter th shadows the module


def test_upstream_follows_values_across_functions():
    src = (
        "import torch\n"
        "def _denom(x):\n"
        "    n = x.norm()\n"
        "    return n + 1e-8\n"
        "def f(a):\n"
        "    b = a * 2\n"
        "    return a / _denom(b)\n"
    )
    tree, flow = _flow(src)
    div = tree.body[2].body[1].value
    names = {d.name for d in flow.upstream(div.right)}
    assert {"n", "b", "a", "x", "_denom"} <= names
    assert "torch" not in names  # the import feeds nothing here


def test_break_and_continue_environments_reach_exit_and_head():
    src = (
        "d = 1\n"
        "for i in xs:\n"
        "    head = d\n"
        "    d = 2\n"
        "    if i:\n"
        "        continue\n"
        "    d = 3\n"
        "    if i > 5:\n"
        "        break\n"
        "    d = 4\n"
        "out = d\n"
    )
    tree, flow = _flow(src)
    head_use, out_use = _names(tree, "d")
    assert _values(flow.defs_reaching(head_use)) == ["1", "2", "4"]
    assert _values(flow.defs_reaching(out_use)) == ["1", "2", "3", "4"]


def test_guards_add_refined_definitions():
    tree, flow = _flow("def f(x, d):\n    if d == 0:\n        return x\n    return x / d\n")
    div = tree.body[0].body[1].value
    (ref,) = flow.defs_reaching(div.right)
    assert ref.how == "refine" and ref.truth is False and ast.unparse(ref.value) == "d == 0"
    (param,) = flow.defs_reaching(ref.node)
    assert param.how == "param"
