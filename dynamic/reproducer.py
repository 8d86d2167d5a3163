"""Render a Witness as a self-contained pytest file that fails while the bug is there.

A reproducer ends in one of three ways, never a pass by accident (the rules are in
``reproducer_runtime``): it **fails** while the op at the site (or, once a fix rewrote the op
away, the program's outputs, loss or gradients) goes non-finite with the witness; it **passes**
when the program ran through with finite values; it **errors** (a pytest error, exit status 1)
when the program raises, does not parse or no longer runs the site's lines, because then it can
no longer judge. The program is run from a module-scoped fixture: what happens there is an error.

Two shapes of file, chosen by how the witness entered the program:

* **plain torch** (``entry:`` witnesses, and ``probe:`` ones, when no weight moved): the file
  imports the program, calls the entry (or builds the probed module with the same seed) with
  the witness's inputs written out as ``torch.tensor([...], dtype=...)`` (large ones loaded from
  a ``.pt`` file beside it), and watches the program with ``reproducer_runtime``'s
  ``TorchFunctionMode``, whose source the file carries inline. Needs only torch and pytest.
* **replay** (``script:`` and ``test:`` witnesses, or moved weights): those need the engine's
  substitution machinery (tensors keyed by creation site, weight deltas), so the file calls
  ``grist_lsp.dynamic.replay.replay`` under the same watch. That file needs grist-lsp installed.

The site is found at run time by function and line *relative to the function's first line*,
so a fix that adds an import at the top of the file does not make the test pass by moving the
op away from a hard-coded line.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import pprint
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grist_lsp.analyzer.catalogue import KINDS, OPS, rule_code
from grist_lsp.analyzer.parsing import UNPARSABLE, parse
from grist_lsp.model import Site, TensorValue, Witness, counted, is_factory_key, to_json
from grist_lsp.notebooks import NotebookError, cell_of, program_text

from .configs import constructor_source

# Tensors with at most this many elements are written inline; larger ones go to the .pt file.
INLINE_ELEMENTS = 64


@dataclass
class Reproducer:
    """A pytest file (``source``, to be saved as ``filename``) and the payload files it loads."""

    filename: str
    source: str
    payloads: dict[str, bytes] = field(default_factory=dict)


def reproducer_filename(site: Site) -> str:
    stem = re.sub(r"\W", "_", Path(site.file).stem)
    return f"test_grist_{stem}_{_line_words(site, '_')}_{site.kind}.py"


def _line_words(site: Site, sep: str) -> str:
    """The site's line as names spell it: ``12``, or ``cell3{sep}2`` in a notebook (cell 3, line 2)."""
    cell = cell_of(site.file, site.span.start_line)
    return str(site.span.start_line) if cell is None else f"cell{cell[0]}{sep}{cell[1]}"


def render_reproducer(
    site: Site, witness: Witness, directory: str | None = None, filename: str | None = None
) -> Reproducer:
    """The reproducer for ``witness`` at ``site``.

    ``directory``: where the file will be written; paths to the program are then written
    relative to it (the pair can move together). Without it they are absolute.
    ``filename``: the test file's name when not ``reproducer_filename(site)`` (a free name
    beside an existing test); payload names follow it, so they never overwrite another's.
    """
    filename = filename or reproducer_filename(site)
    kind, _, _ = witness.entry.partition(":")
    weights_moved = (
        any(v for v in witness.weights_moved.values())
        or bool(witness.weight_deltas)
        or bool(witness.weight_values)
    )
    payload_tensors = _payload_tensors(witness)
    missing = [n for n, tv in witness.inputs.items() if tv.values is None and n not in payload_tensors]
    # Tensors the program draws itself (``torch.randn_like`` in a forward) can only be fixed by the
    # engine's substitution: such witnesses replay through it too.
    drawn = any(is_factory_key(n) for n in witness.inputs)
    if kind in ("entry", "probe") and not weights_moved and not missing and not drawn:
        return _render_plain(site, witness, filename, directory, payload_tensors)
    return _render_replay(site, witness, filename, directory)


def write_reproducer(site: Site, witness: Witness, directory: str, filename: str | None = None) -> str:
    """Write the reproducer (and its payloads) into ``directory``; returns the test file's path."""
    os.makedirs(directory, exist_ok=True)
    repro = render_reproducer(site, witness, directory, filename)
    for name, data in repro.payloads.items():
        Path(directory, name).write_bytes(data)
    path = os.path.join(directory, repro.filename)
    Path(path).write_text(repro.source, encoding="utf-8")
    return path


# --- pieces shared by both shapes -------------------------------------------------------


def _docstring(site: Site, witness: Witness, how: str) -> str:
    kind = KINDS.get(site.kind)
    title = kind.title if kind else site.kind
    cell = cell_of(site.file, site.span.start_line)
    line = f"cell {cell[0]}:{cell[1]}" if cell else site.span.start_line
    where = f"{Path(site.file).name}:{line}:{site.span.start_col + 1}"
    op = site.op or site.kind
    moved = ", ".join(f"{k} by {v:.3g}" for k, v in witness.weights_moved.items() if v)
    if witness.steps is not None:
        # A training run's state: the weights are where the program's own optimizer took them.
        moved = (
            f"the weights as the program's own training left them after {counted(witness.steps, 'step')}"
            + (f" ({moved})" if moved else "")
        )
    else:
        moved = "weights moved: " + moved if moved else ""
    summary = (
        f"`{site.text.strip()}` ({op}) gives {witness.result} in the {witness.phase} pass when the "
        f"program is entered as {witness.entry} with the inputs below (found by grist-lsp's search, "
        f"seed {witness.seed}{'; ' + moved if moved else ''}). This test fails while "
        f"the bug is there and passes once it is fixed; it errors (it can no longer judge) when the "
        f"program raises, does not parse or no longer runs that line."
    )
    lines = [
        f"Reproducer for {rule_code(site.kind)} ({title}) at {where}.",
        "",
        *textwrap.wrap(summary, 96, break_long_words=False, break_on_hyphens=False),
        "",
        *textwrap.wrap(how, 96, break_long_words=False, break_on_hyphens=False),
    ]
    return _run_comment() + '"""' + "\n".join(lines).rstrip() + '\n"""\n'


def _run_comment() -> str:
    return (
        "# Run it: python -m pytest <this file>\n"
        '# It needs pytest; if `python -m pytest` says "No module named pytest": pip install pytest\n'
    )


def _site_lines(site: Site) -> tuple[str, int, range]:
    """(code qualname, its first line, the site's lines counted from that first line)."""
    function = _function_start(site)
    if function is not None:
        qualname, first = function
        return qualname, first, range(site.span.start_line - first, site.span.end_line - first + 1)
    # module level (or the file is not readable): lines of <module>, which starts at line 1
    return "<module>", 1, range(site.span.start_line - 1, site.span.end_line)


def _entry_file(witness: Witness) -> str | None:
    """The file named by an ``entry:file.py:f`` or ``test:file.py::t`` label."""
    kind, _, rest = witness.entry.partition(":")
    if kind == "entry":
        return rest.rpartition(":")[0] or None
    if kind == "test":
        return rest.partition("::")[0] or None
    return None


def _watched(site: Site, witness: Witness, program_files: list[str]) -> list[str]:
    """The lines of code defining ``SITE`` (a ``WatchedSite``) in the reproducer."""
    qualname, _, lines = _site_lines(site)
    kind = KINDS.get(site.kind)
    others = ", ".join(program_files)
    return [
        "SITE = WatchedSite(",
        "    program=PROGRAM,",
        f"    function={qualname!r},",
        f"    lines={tuple(lines)!r},  # the op's lines, counted from the function's first line",
        f"    ops=frozenset({sorted(_runtime_names(site))!r}),  # runtime names of {site.kind} ops",
        f"    label={f'{site.op or site.kind} at {Path(site.file).name}:{site.span.start_line}'!r},",
        f"    backward={witness.phase == 'backward'},",
        f"    masked={bool(kind and kind.region.inf_operands)},",
        f"    raises={bool(kind and kind.region.raises)},",
        f"    program_files=frozenset({{{others}}})," if others else "    program_files=frozenset(),",
        ")",
    ]


def _runtime_source() -> str:
    """``reproducer_runtime``'s code without its docstring, to be carried inline."""
    from . import reproducer_runtime

    source = inspect.getsource(reproducer_runtime)
    body = parse(source).body
    start = body[1].lineno if isinstance(body[0], ast.Expr) else 1
    code = "\n".join(source.splitlines()[start - 1 :])
    return (
        "# --- grist-lsp's reproducer runtime, carried inline so that this file needs only torch\n"
        "# and pytest: run the program, watch the site, judge fail / pass / cannot judge ---\n\n" + code
    )


_FIXTURE_AND_TEST = '''

@pytest.fixture(scope="module")
def failures() -> list[str]:
    """Run the program once with the witness. Raises (a pytest *error*, not a pass) when the
    program raises, does not parse, or no longer runs the site's line."""
    observation, result = observe(SITE, run_program, watch_site=WATCH_SITE)
    if not WATCH_SITE and result is not None:
        apply_replay(observation, result)
    return judge(SITE, observation)


def {name}(failures: list[str]) -> None:
    assert not failures, failures[0]
'''


def _program_path_expr(path: str, directory: str | None) -> str:
    """Python code for the program's path: relative to the reproducer when we know where it goes."""
    absolute = os.path.abspath(path)
    if directory is not None:
        rel = os.path.relpath(absolute, os.path.abspath(directory))
        return f"(Path(__file__).parent / {rel.replace(os.sep, '/')!r}).resolve()"
    return f"Path({absolute!r})"


def _test_name(site: Site) -> str:
    stem = re.sub(r"\W", "_", Path(site.file).stem)
    words = _line_words(site, "_line_")
    return f"test_{site.kind}_at_{stem}_{words if words.startswith('cell') else 'line_' + words}_is_finite"


def _payload_tensors(witness: Witness) -> dict[str, Any]:
    """name -> tensor for the inputs too large to be inline in the witness (``TensorValue.file``)."""
    found: dict[str, Any] = {}
    for name, tv in witness.inputs.items():
        if tv.values is None and tv.file and os.path.exists(tv.file):
            import torch

            data = torch.load(tv.file, map_location="cpu", weights_only=True)
            if isinstance(data, torch.Tensor):
                found[name] = data
    return found


def _runtime_names(site: Site) -> list[str]:
    """Every catalogue name of the site's kind: the runtime name may differ from the source's
    spelling (``x / y`` is traced as ``torch.Tensor.div``), and matching the kind at the site's
    line is what identifies the op."""
    return sorted(op.name for op in OPS if op.kind == site.kind)


def _function_start(site: Site) -> tuple[str, int] | None:
    """(qualified name, first line as ``co_firstlineno`` counts it) of the site's function."""
    if not site.function:
        return None
    try:
        tree = parse(program_text(site.file))
    except (OSError, NotebookError, *UNPARSABLE):  # UnicodeDecodeError is a ValueError
        return None

    def walk(body: list[ast.stmt], code_prefix: str, plain_prefix: str) -> tuple[str, int] | None:
        # ``co_qualname`` spells nested functions ``outer.<locals>.inner``; the site may name
        # them either way
        for node in body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            code_qual, plain_qual = code_prefix + node.name, plain_prefix + node.name
            is_function = not isinstance(node, ast.ClassDef)
            if (
                is_function
                and site.function in (code_qual, plain_qual)
                and node.lineno <= site.span.start_line <= (node.end_lineno or node.lineno)
            ):
                return code_qual, min([node.lineno] + [d.lineno for d in node.decorator_list])
            found = walk(node.body, code_qual + (".<locals>." if is_function else "."), plain_qual + ".")
            if found:
                return found
        return None

    return walk(tree.body, "", "")


# --- tensors as code ---------------------------------------------------------------------


def _literal(value: Any) -> str:
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):  # how witnesses carry non-finite floats
        return f"float({value!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    return repr(value)


def _finite_floats(values: Any) -> Any:
    """Witness values with the "nan"/"inf" strings turned back into floats."""
    if isinstance(values, list):
        return [_finite_floats(v) for v in values]
    return float(values) if isinstance(values, str) else values


def _dtype_expr(dtype: str) -> str:
    name = dtype.replace("torch.", "")
    return f"torch.{name}" if re.fullmatch(r"\w+", name) else "torch.float32"


def _tensor_expr(name: str, tv: TensorValue, payload_file: str | None) -> str:
    if tv.dtype.startswith("python:"):  # a number passed as an argument (dim=1, eps=0.0)
        return _literal(tv.values)
    if tv.values is not None and _count(tv.values) <= INLINE_ELEMENTS:
        text = f"torch.tensor({_literal(tv.values)}, dtype={_dtype_expr(tv.dtype)})"
        if list(tv.shape) and _count(tv.values) == 0:
            text += f".reshape({list(tv.shape)})"
        return text
    return f"PAYLOAD[{name!r}]"


def _count(values: Any) -> int:
    if isinstance(values, list):
        return sum(_count(v) for v in values) if values and isinstance(values[0], list) else len(values)
    return 1


# --- plain torch reproducer ---------------------------------------------------------------

_LOAD = '''
def fresh(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


def parameter_names(fn, count: int) -> list[str]:
    """How the search named positional arguments: the parameters of the function (of forward
    for a Module), then arg<i>."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = inspect.signature(target).parameters.values()
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def load_program(path: Path):
    """Import the program file the way `python -c "import <module>"` would from its root."""
    root, parts = path.parent, [path.stem]
    while (root / "__init__.py").exists():  # a package module: import it under its dotted name
        parts.insert(0, root.name)
        root = root.parent
    sys.path.insert(0, str(root))
    return importlib.import_module(".".join(parts))
'''


def _render_plain(
    site: Site, witness: Witness, filename: str, directory: str | None, payload_tensors: dict[str, Any]
) -> Reproducer:
    kind, _, rest = witness.entry.partition(":")
    payload_name = Path(filename).with_suffix(".pt").name
    needs_payload = [
        n
        for n, tv in witness.inputs.items()
        if not tv.dtype.startswith("python:") and (tv.values is None or _count(tv.values) > INLINE_ELEMENTS)
    ]
    payloads: dict[str, bytes] = {}
    if needs_payload:
        payloads[payload_name] = _saved_inputs(witness, needs_payload, payload_tensors)

    probe = re.fullmatch(r"(.*\.py):([\w.]+)(\(.*\))?", rest) if kind == "probe" else None
    if kind == "probe" and not probe:
        return _render_replay(site, witness, filename, directory)

    how = (
        "It needs only torch and pytest: the op is watched with a TorchFunctionMode and"
        " found by its function and its line within that function."
    )
    out = [
        _docstring(site, witness, how),
        "import importlib\nimport inspect\n"
        + ("import random\n" if kind == "probe" else "")
        + "import sys\nfrom pathlib import Path\n\nimport pytest\nimport torch\n",
        _runtime_source(),
        "",
        f"PROGRAM = {_program_path_expr(site.file, directory)}",
    ]
    program_files: list[str] = []
    if probe is None:
        out += _entry_constants(site, rest, directory, program_files)
    else:
        out += _probe_constants(probe, witness)
    out.extend(_watched(site, witness, program_files))
    out.append("WATCH_SITE = True  # this file judges the op at the site itself")
    out.append("")
    if needs_payload:
        out.append(f"PAYLOAD = torch.load(Path(__file__).with_name({payload_name!r}), weights_only=True)")
    out.append("INPUTS = {  # the values the search found")
    for name, tv in witness.inputs.items():
        out.append(f"    {name!r}: {_tensor_expr(name, tv, payload_name)},")
    out.append("}")
    out.append(_LOAD)
    out.append(_RUN_PROBE if probe is not None else _RUN_ENTRY)
    out.append(_FIXTURE_AND_TEST.format(name=_test_name(site)))
    return Reproducer(filename=filename, source="\n".join(out), payloads=payloads)


def _saved_inputs(witness: Witness, names: list[str], payload_tensors: dict[str, Any]) -> bytes:
    """The payload file's bytes: the inputs ``names`` saved with torch.save, by name."""
    import io

    import torch

    tensors = {}
    for n in names:
        if n in payload_tensors:
            tensors[n] = payload_tensors[n]
        else:
            tv = witness.inputs[n]
            values = _finite_floats(tv.values)
            tensors[n] = torch.tensor(values, dtype=getattr(torch, tv.dtype.replace("torch.", ""))).reshape(
                tv.shape
            )
    buf = io.BytesIO()
    torch.save(tensors, buf)
    return buf.getvalue()


def _entry_constants(site: Site, rest: str, directory: str | None, program_files: list[str]) -> list[str]:
    """ENTRY_FILE and ENTRY of an ``entry:file.py:function`` witness (``rest`` after ``entry:``);
    an entry file other than the site's joins ``program_files``."""
    entry_file, _, entry_func = rest.rpartition(":")
    lines = []
    if os.path.abspath(entry_file) != os.path.abspath(site.file):
        lines.append(f"ENTRY_FILE = {_program_path_expr(entry_file, directory)}")
        program_files.append("ENTRY_FILE")
    else:
        lines.append("ENTRY_FILE = PROGRAM")
    lines.append(f"ENTRY = {entry_func!r}  # returns (callable, args) or (callable, args, kwargs)")
    return lines


def _probe_constants(probe: re.Match[str], witness: Witness) -> list[str]:
    """PROBED, constructor_args and SEED of a ``probe:file.py:Name(args)`` witness."""
    ctor = constructor_source(probe.group(3), "program") if probe.group(3) else "()"
    return [
        f"PROBED = {probe.group(2)!r}",
        f"SEED = {witness.seed}  # the module's initial weights come from this seed",
        "",
        "",
        "def constructor_args(program):",
        '    """What the probe built the module with (config dataclasses come from the program)."""',
        f"    return {ctor}",
    ]


_RUN_ENTRY = """
def run_program():
    made = getattr(load_program(ENTRY_FILE), ENTRY)()
    fn, args = made[0], list(made[1]) if isinstance(made[1], (list, tuple)) else [made[1]]
    kwargs = dict(made[2]) if len(made) == 3 else {}
    for i, name in enumerate(parameter_names(fn, len(args))):
        if name in INPUTS:
            args[i] = fresh(INPUTS[name])
    for name in kwargs:
        if name in INPUTS:
            kwargs[name] = fresh(INPUTS[name])
    return fn(*args, **kwargs)
"""

_RUN_PROBE = """
def run_program():
    torch.manual_seed(SEED)  # the search seeded torch, random and numpy before building the module
    random.seed(SEED)
    try:
        import numpy

        numpy.random.seed(SEED % 2**32)
    except ImportError:
        pass
    program = load_program(PROGRAM)
    obj = getattr(program, PROBED)
    if isinstance(obj, type):
        obj = obj(*constructor_args(program))
    names = parameter_names(obj, len(INPUTS))
    return obj(*[fresh(INPUTS[name]) for name in names if name in INPUTS])
"""


# --- replay reproducer ---------------------------------------------------------------------


def _render_replay(site: Site, witness: Witness, filename: str, directory: str | None) -> Reproducer:
    """A test that hands the witness to ``grist_lsp.dynamic.replay.replay`` under the watch.

    Tensors the witness keeps in files (large inputs, weight deltas) are copied beside the test
    and the witness is pointed at the copies, so the pair can move to another machine.
    """
    w = to_json(witness)
    for key in ("reproducer", "reproducer_source", "payload"):
        w[key] = None
    payloads, relocated = _relocate_payloads(w, Path(filename).stem)
    s = to_json(site)
    recorded = os.path.abspath(site.file)
    s["file"] = None
    how = (
        "It needs grist-lsp installed (`pip install grist-lsp`): entering the program this way"
        " substitutes tensors by their creation site and moves weights, which only the engine's"
        " replay does."
    )
    _, first, _ = _site_lines(site)
    entry_file = _entry_file(witness)
    program_files: list[str] = []
    lines = [
        _docstring(site, witness, how),
        "import dataclasses",
        "from pathlib import Path\n",
        "import pytest\n",
        "from grist_lsp.dynamic.replay import replay",
        "from grist_lsp.dynamic.reproducer_runtime import WatchedSite, apply_replay, judge, moved_by, observe",
        "from grist_lsp.model import Span, site_from_json, witness_from_json",
        "from grist_lsp.notebooks import program_text\n",
        f"PROGRAM = {_program_path_expr(site.file, directory)}",
    ]
    if entry_file and os.path.abspath(entry_file) != recorded:
        lines.append(f"ENTRY_FILE = {_program_path_expr(entry_file, directory)}")
        program_files.append("ENTRY_FILE")
    lines += [
        f"SITE_JSON = {pprint.pformat(s, width=100, sort_dicts=False)}",
        'SITE_JSON["file"] = str(PROGRAM)',
        f"FIRST_LINE = {first}  # where the site's function started when the witness was found",
        f"SITE_LINE_TEXT = {_site_line_text(site)!r}",
        f"WITNESS = {pprint.pformat(w, width=100, sort_dicts=False)}",
        "# the entry names the program by the path it had when the witness was found",
        f'WITNESS["entry"] = WITNESS["entry"].replace({recorded!r}, str(PROGRAM))',
    ]
    if entry_file and program_files:
        lines.append(
            f'WITNESS["entry"] = WITNESS["entry"].replace({os.path.abspath(entry_file)!r}, str(ENTRY_FILE))'
        )
    for field_name, name, payload in relocated:
        lines.append(
            f"WITNESS[{field_name!r}][{name!r}]['file'] = str(Path(__file__).with_name({payload!r}))"
        )
    lines.extend(_watched(site, witness, program_files))
    lines += _REPLAY_RUN_PROGRAM
    source = "\n".join(lines) + "\n" + _FIXTURE_AND_TEST.format(name=_test_name(site))
    return Reproducer(filename=filename, source=source, payloads=payloads)


def _relocate_payloads(w: dict[str, Any], stem: str) -> tuple[dict[str, bytes], list[tuple[str, str, str]]]:
    """The witness's file-held tensors (in its JSON form ``w``) copied as payloads named after
    the test's ``stem``, their ``file`` cleared in ``w``: (payloads, [(witness field, name,
    payload file)])."""
    payloads: dict[str, bytes] = {}
    relocated: list[tuple[str, str, str]] = []
    for field_name in ("inputs", "weight_deltas", "weight_values"):
        for name, tv in (w.get(field_name) or {}).items():
            if tv.get("file") and os.path.exists(tv["file"]):
                payload = f"{stem}_{re.sub(r'[^A-Za-z0-9_-]', '_', name)}.pt"
                payloads[payload] = Path(tv["file"]).read_bytes()
                tv["file"] = None
                relocated.append((field_name, name, payload))
    return payloads, relocated


def _site_line_text(site: Site) -> str:
    """The text of the site's first line as it is now ("" when the file cannot be read)."""
    try:
        return program_text(site.file).splitlines()[site.span.start_line - 1]
    except (OSError, UnicodeDecodeError, NotebookError, IndexError):
        return ""


_REPLAY_RUN_PROGRAM = [
    "WATCH_SITE = False  # the engine's replay judges the op at the site",
    "",
    "",
    "def run_program():",
    '    """Replay the witness on the program as it is now, following the site if lines moved above it."""',
    "    site = site_from_json(SITE_JSON)",
    "    shift = moved_by(program_text(PROGRAM), SITE.function, FIRST_LINE, SITE_LINE_TEXT,",
    "                     site.span.start_line)",
    "    if shift:",
    "        span = site.span",
    "        site = dataclasses.replace(site, span=Span(span.start_line + shift, span.start_col,",
    "                                                   span.end_line + shift, span.end_col))",
    "    return replay(site, witness_from_json(WITNESS))",
]
