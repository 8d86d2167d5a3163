"""Writes analyzer/array_api.py: what torch's and numpy's own type stubs declare about arrays.

    python scripts/gen_array_api.py            # from the installed torch and numpy
    python scripts/gen_array_api.py --check    # exit 1 when the committed table differs

The static pass asks "can this operand be a tensor or an array at all?" (analyzer/tensors.py).
Its answers about library calls come from the libraries' declared types, not from a list written
by hand: a Tensor method whose every overload returns a ``Tensor`` makes an array, one none of
whose overloads does (``item``, ``size``, ``dim``, ``tolist``) makes a Python value; a torch
function whose first parameter is a ``Tensor`` says its first argument is an array. The output
is a plain data module, so the analyzer stays torch-free and pays no parsing at start-up.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

from grist_lsp.analyzer.parsing import parse

OUT = Path(__file__).resolve().parents[1] / "analyzer" / "array_api.py"
_ARRAY_WORDS = ("Tensor", "ndarray", "Parameter", "NDArray", "return_types")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        sys.exit(f"gen_array_api: {name} is not installed; install it and run again")
    return Path(spec.origin).parent


def _returns_array(f: ast.FunctionDef) -> bool | None:
    """True: the declared return names an array type; False: it names none; None: undeclared."""
    if f.returns is None:
        return None
    text = ast.unparse(f.returns)
    return any(w in text for w in _ARRAY_WORDS) or text in ("Self", "_T", "T")


def _first_param_array(f: ast.FunctionDef) -> bool:
    params = [*f.args.posonlyargs, *f.args.args]
    if params and params[0].arg in ("self", "cls"):
        params = params[1:]
    return bool(params) and params[0].annotation is not None and "Tensor" in ast.unparse(params[0].annotation)


def _defs(body: list[ast.stmt]) -> dict[str, list[ast.FunctionDef]]:
    out: dict[str, list[ast.FunctionDef]] = {}
    for s in body:
        if isinstance(s, ast.FunctionDef):
            out.setdefault(s.name, []).append(s)
    return out


def _split(defs: dict[str, list[ast.FunctionDef]]) -> tuple[set[str], set[str]]:
    """Names whose every declared overload returns an array, and names none of whose does."""
    arrays, others = set(), set()
    for name, overloads in defs.items():
        got = {_returns_array(f) for f in overloads} - {None}
        if got == {True}:
            arrays.add(name)
        elif got == {False}:
            others.add(name)
    return arrays, others


def _class_body(tree: ast.Module, name: str) -> list[ast.stmt]:
    for s in tree.body:
        if isinstance(s, ast.ClassDef) and s.name == name:
            return s.body
    sys.exit(f"gen_array_api: class {name} not found in the stubs")


def _set(name: str, values: set[str], doc: str) -> str:
    values = {
        v for v in values if not v.startswith("_")
    }  # private and dunder names: never spelled in user code
    body = "".join(f"        {json.dumps(v)},\n" for v in sorted(values))
    return f"# {doc}\n{name}: frozenset[str] = frozenset(\n    {{\n{body}    }}\n)\n"


def main() -> None:
    torch_dir, numpy_dir = _package_dir("torch"), _package_dir("numpy")
    tensor = _defs(_class_body(parse((torch_dir / "_C" / "__init__.pyi").read_text()), "TensorBase"))
    method_arrays, method_others = _split(tensor)
    functions: dict[str, list[ast.FunctionDef]] = {}
    for stub in ("_C/_VariableFunctions.pyi", "nn/functional.pyi", "functional.py", "_C/_nn.pyi"):
        path = torch_dir / stub
        if path.exists():
            for name, defs in _defs(parse(path.read_text()).body).items():
                functions.setdefault(name, []).extend(defs)
    fn_arrays, fn_others = _split(functions)
    takes_array = {n for n, defs in functions.items() if all(_first_param_array(f) for f in defs)}
    numpy_stub = parse((numpy_dir / "__init__.pyi").read_text())
    ndarray = _defs(_class_body(numpy_stub, "ndarray"))
    common = _defs(_class_body(numpy_stub, "_ArrayOrScalarCommon"))
    nd_methods = {n for n in {*ndarray, *common} if not n.startswith("__")}
    import numpy
    import torch

    text = (
        '"""What torch\'s and numpy\'s type stubs declare about arrays (generated: do not edit).\n\n'
        f"Written by scripts/gen_array_api.py from torch {torch.__version__} and numpy {numpy.__version__}.\n"
        "Read by analyzer/tensors.py; a name in no set is judged by its arguments.\n"
        '"""\n\n'
        + _set("TENSOR_METHODS", method_arrays, "Tensor methods every overload of which returns a Tensor.")
        + "\n"
        + _set("PYTHON_METHODS", method_others, "Tensor methods none of whose overloads returns a Tensor.")
        + "\n"
        + _set("ARRAY_FUNCTIONS", fn_arrays, "torch / torch.nn.functional functions returning a Tensor.")
        + "\n"
        + _set("PYTHON_FUNCTIONS", fn_others, "torch / torch.nn.functional functions returning no Tensor.")
        + "\n"
        + _set("ARRAY_FIRST", takes_array, "torch functions whose first parameter is declared a Tensor.")
        + "\n"
        + _set("NDARRAY_METHODS", nd_methods, "numpy.ndarray's public methods.")
    )
    if "--check" in sys.argv[1:]:
        if OUT.read_text() != text:
            sys.exit(
                f"{OUT} is not what torch {torch.__version__}'s stubs give: run scripts/gen_array_api.py"
            )
        print(f"{OUT} matches torch {torch.__version__} and numpy {numpy.__version__}")
        return
    OUT.write_text(text)
    print(
        f"wrote {OUT}: {len(method_arrays)} array / {len(method_others)} other Tensor methods, "
        f"{len(fn_arrays)} array / {len(fn_others)} other functions, {len(takes_array)} taking an array first"
    )


if __name__ == "__main__":
    main()
