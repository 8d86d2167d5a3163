"""How to run a user's program: entry discovery and one traced run of each kind of entry.

Kinds, tried in this order by ``discover``, each labelled the way ``Witness.entry`` spells it:

* ``entry:<file.py>:<function>``: an explicit entry (``--entry`` / ``[tool.grist] entries``)
  returning ``(callable, args)`` or ``(callable, args, kwargs)``; inputs are the tensor
  arguments, named by the callable's parameter names;
* ``test:<test_file.py>::<test_name>``: an argument-less pytest test function in the
  project that imports the file; inputs are the tensors the test creates (see tracing);
* ``script:<file.py>``: the file run as ``__main__``;
* ``probe:<file.py>:<Name>`` (``probe:<file.py>:<Name>(16, 16)`` when the constructor
  needed arguments): an ``nn.Module`` class or a plain function of the file, called with
  synthesized inputs named by its parameters.

The target file always runs from ``text`` (an unsaved buffer may differ from disk),
compiled under its absolute path so that frame positions match the Sites.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import random
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import torch
from torch.utils.weak import WeakTensorKeyDictionary

from grist_lsp.analyzer.importers import importers, python_files
from grist_lsp.analyzer.parsing import UNPARSABLE, parse
from grist_lsp.analyzer.programs import ENTRY_CONTRACT, has_training_loop, is_script, is_test_file
from grist_lsp.discovery import imports_into
from grist_lsp.model import is_factory_key
from grist_lsp.notebooks import NotebookError, is_notebook, program_text

from .configs import annotated_config, config_constructors, constructor_args, constructor_text
from .tracing import QUIET_CALLS, SiteOutcome, Tracer, TracerConfig, trace_call

BATCH = 4  # batch size of synthesized inputs
LABEL_NAMES = frozenset(
    {"y", "target", "targets", "label", "labels", "t", "y_true", "cls", "classes", "idx", "index", "indices"}
)
MASK_NAMES = frozenset({"mask", "attention_mask", "padding_mask", "attn_mask", "key_padding_mask"})
LENGTH_NAMES = frozenset({"lengths", "length", "lens", "seq_lens", "seq_lengths", "x_lens"})


class EntryError(Exception):
    """An entry that cannot even be set up (bad spec, import error in the entry's file)."""


def seed_everything(seed: int) -> None:
    """Same seed before every run: dropout, shuffles and unsubstituted random tensors repeat."""
    # The CPU generator only: torch.manual_seed also seeds accelerators, which costs
    # milliseconds per call (per run of the search).
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass


# --- running the buffer's text as the target module ----------------------------


class _TextLoader(importlib.abc.Loader):
    def __init__(self, filename: str, text: str) -> None:
        self.filename = filename
        self.text = text

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        module.__file__ = self.filename
        exec(compile(self.text, self.filename, "exec", dont_inherit=True), module.__dict__)


class TextFinder(importlib.abc.MetaPathFinder):
    """Makes ``import <target module>`` execute the buffer's text instead of the file on disk."""

    def __init__(self, filename: str, text: str) -> None:
        self.filename = filename
        self.real = os.path.realpath(filename)
        self.text = text

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.rpartition(".")[2] != os.path.splitext(os.path.basename(self.real))[0]:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or os.path.realpath(spec.origin) != self.real:
            return None
        spec.loader = _TextLoader(self.filename, self.text)
        return spec


def module_name_for(path: str) -> tuple[str, str]:
    """(directory to put on sys.path, dotted module name) for a file, following __init__.py upward."""
    d = os.path.dirname(os.path.abspath(path))
    parts = [os.path.splitext(os.path.basename(path))[0]]
    while os.path.exists(os.path.join(d, "__init__.py")):
        parts.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    return d, ".".join(parts)


def load_module_from_file(path: str, text: str | None = None) -> Any:
    """Import a file as its package module when possible, else standalone under its stem."""
    root, name = module_name_for(path)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        mod = importlib.import_module(name)
        if os.path.realpath(getattr(mod, "__file__", "") or "") == os.path.realpath(path):
            return mod
    except ImportError as e:
        if getattr(e, "name", None) not in (None, name) and not name.endswith("." + str(e.name)):
            raise
    stem = "_grist_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    if is_notebook(path):  # no import machinery reads .ipynb: its script, as the module's text
        text = program_text(path) if text is None else text
        spec = importlib.util.spec_from_loader(stem, _TextLoader(os.path.abspath(path), text))
    else:
        spec = importlib.util.spec_from_file_location(stem, path)
    if spec is None or spec.loader is None:
        raise EntryError(f"{path}: cannot be imported as a module; check the file name")
    if text is not None:
        spec.loader = _TextLoader(os.path.abspath(path), text)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[stem] = mod
    spec.loader.exec_module(mod)
    return mod


# --- programs ---------------------------------------------------------------


class ProgramBase(TypedDict):
    """The constructor arguments every program of one checked file shares (``Program(**base)``)."""

    target_file: str
    texts: dict[str, str]
    seed: int


class ProbeBase(ProgramBase):
    """``ProgramBase`` plus what every probe of the file shares."""

    user_files: frozenset[str]
    text: str


@dataclass
class Program:
    """One way into the user's program. ``run`` executes it once under a Tracer."""

    label: str
    target_file: str  # absolute path; co_filename of the target's code
    texts: dict[str, str]  # co_filename -> source, for byte -> code-point columns
    user_files: frozenset[str]
    seed: int = 0
    produced: WeakTensorKeyDictionary = field(default_factory=WeakTensorKeyDictionary)
    # Input key -> the variable holding it, for inputs no factory call names (``Tracer.input_names``).
    input_names: dict[str, str] = field(default_factory=dict)
    # Command-line arguments of a program run as ``__main__`` (``[tool.grist] script-args``).
    argv: list[str] = field(default_factory=list)

    @property
    def script(self) -> str | None:
        """The file this program runs as ``__main__`` (the one that reads ``sys.argv``), if any."""
        return None

    def setup(self) -> None:
        """Once per worker: imports and anything else that must not repeat per run."""

    def prepare(self) -> tuple[Callable[..., Any], list[tuple[str, Any, bool]]]:
        """(callable, [(name, value, is_keyword)]) for this run; tensor values are inputs."""
        raise NotImplementedError

    @functools.cached_property
    def trains(self) -> bool:
        """Whether one of the program's own files (the script, the test, the entry) has a
        training loop: GRIST's own setting (``training.py``). Read once per program."""
        for path in self.user_files:
            text = self.texts.get(path)
            if text is None:
                try:
                    text = program_text(path)
                except (OSError, UnicodeDecodeError, NotebookError):
                    continue
            if has_training_loop(text):
                return True
        return False

    def produce_only(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (imports, model construction) under a tracer that only notes what it makes.

        Tensors made there (module constants, buffers) are then known as the program's own,
        never mistaken for external inputs when they show up as operands later.
        """
        cfg = TracerConfig(
            target_file=self.target_file,
            texts=self.texts,
            sites=[],
            user_files=frozenset(),
            produced=self.produced,
            local_backward=False,
        )
        with Tracer(cfg):
            return fn()

    @property
    def quiet_calls(self) -> int | None:
        """Torch calls a run may make without reaching a new site before it stops (None: no limit)."""
        return None

    def tracer_config(self, **kw: Any) -> TracerConfig:
        kw.setdefault("quiet_calls", self.quiet_calls)
        return TracerConfig(
            target_file=self.target_file,
            texts=self.texts,
            user_files=self.user_files,
            produced=self.produced,
            **kw,
        )

    def run(
        self, cfg: TracerConfig, grad_everywhere: bool = False
    ) -> tuple[Tracer, SiteOutcome | None, BaseException | None]:
        """One run under a fresh Tracer. ``grad_everywhere``: the user's ``torch.no_grad`` blocks
        record the graph anyway (values are unchanged), so that the search has gradients in
        inference code."""
        seed_everything(self.seed)
        tracer = Tracer(cfg)
        try:
            call, named = self.produce_only(self.prepare)
        except BaseException as e:  # the entry function itself failed
            return tracer, None, e
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, value, is_kw in named:
            if isinstance(value, torch.Tensor):
                if cfg.record:
                    tracer.recorded[name] = value.detach().clone()
                sub = cfg.subs.get(name)
                if sub is not None:
                    value = sub.clone()
                self.produced[value] = True
            elif isinstance(value, (bool, int, float)):
                # Numbers and flags are part of the witness too (replay passes them again).
                if cfg.record:
                    tracer.recorded[name] = value
                value = cfg.subs.get(name, value)
            tracer.used_inputs.append(name)
            if is_kw:
                kwargs[name] = value
            else:
                args.append(value)
        if grad_everywhere:
            with _GradEverywhere(self.user_files):
                outcome, error = trace_call(tracer, lambda: call(*args, **kwargs))
        else:
            outcome, error = trace_call(tracer, lambda: call(*args, **kwargs))
        return tracer, outcome, error


class _KeepGrad:
    """Stands in for ``torch.no_grad`` / ``torch.inference_mode`` (as context and decorator)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _KeepGrad:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass  # never swallows the exception

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

    def clone(self) -> _KeepGrad:
        return self


class _GradEverywhere:
    """Swaps the no-grad context managers in ``torch`` for one run, for the user's files only.

    Torch's own code (parameter init, optimizers) keeps the real ones: its in-place updates of
    parameters need them.
    """

    _NAMES = (
        ("torch", "no_grad"),
        ("torch", "inference_mode"),
        ("torch.autograd", "no_grad"),
        ("torch.autograd", "inference_mode"),
        ("torch.autograd.grad_mode", "no_grad"),
        ("torch.autograd.grad_mode", "inference_mode"),
    )

    def __init__(self, user_files: frozenset[str]) -> None:
        self.user_files = user_files

    def _switch(self, original: Any) -> Any:
        user_files = self.user_files

        def make(*args: Any, **kwargs: Any) -> Any:
            if sys._getframe(1).f_code.co_filename in user_files:
                return _KeepGrad(*args, **kwargs)
            return original(*args, **kwargs)

        return make

    def __enter__(self) -> None:
        self.saved = []
        for mod_name, attr in self._NAMES:
            mod = sys.modules.get(mod_name)
            if mod is not None and hasattr(mod, attr):
                self.saved.append((mod, attr, getattr(mod, attr)))
        for mod, attr, value in self.saved:
            setattr(mod, attr, self._switch(value))

    def __exit__(self, *exc: Any) -> None:
        for mod, attr, value in self.saved:
            setattr(mod, attr, value)


def split_arguments(named: list[tuple[str, Any, bool]]) -> tuple[list[Any], dict[str, Any]]:
    """``prepare``'s ``(name, value, is_keyword)`` list as positional and keyword arguments."""
    return [v for _, v, kw in named if not kw], {n: v for n, v, kw in named if kw}


def _named_args(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[tuple[str, Any, bool]]:
    """Arguments named by the callable's parameters (a Module's ``forward``), ``arg<i>`` past them."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = inspect.signature(target).parameters.values()
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    out = []
    for i, a in enumerate(args):
        out.append((names[i] if i < len(names) else f"arg{i}", a, False))
    out.extend((k, v, True) for k, v in kwargs.items())
    return out


def _display_nothing(*objects: Any, **options: Any) -> None:
    """IPython's ``display`` in a notebook run as a script: nothing to show it to."""


def _as_main(code: Any, file: str, argv: list[str]) -> Callable[[], None]:
    """A body that runs compiled ``code`` as ``python file *argv`` would: ``__main__``, its argv."""

    def body() -> None:
        g = {"__name__": "__main__", "__file__": file, "__builtins__": builtins}
        if is_notebook(file):
            # A kernel's display() shows a value; run as a script, a notebook shows nothing.
            g["display"] = _display_nothing
        sys.argv = [file, *argv]
        exec(code, g)

    return body


@dataclass
class ScriptProgram(Program):
    text: str = ""

    def setup(self) -> None:
        self.code = compile(self.text, self.target_file, "exec", dont_inherit=True)

    def prepare(self) -> tuple[Callable[..., Any], list[tuple[str, Any, bool]]]:
        return _as_main(self.code, self.target_file, self.argv), []

    @property
    def script(self) -> str | None:
        return self.target_file


@dataclass
class RunProgram(Program):
    """``run:scripts/train.py``: another script of the project, one that imports the target
    module, run as ``__main__`` (the target module is imported from the checked text)."""

    script_file: str = ""

    def setup(self) -> None:
        self.code = compile(program_text(self.script_file), self.script_file, "exec", dont_inherit=True)

    def prepare(self) -> tuple[Callable[..., Any], list[tuple[str, Any, bool]]]:
        return _as_main(self.code, self.script_file, self.argv), []

    @property
    def script(self) -> str | None:
        return self.script_file

    @property
    def quiet_calls(self) -> int | None:
        # The script's own loop may never meet the module's sites (``tracing.QUIET_CALLS``).
        return QUIET_CALLS


@dataclass
class EntryProgram(Program):
    """``entry:file.py:function``: the function returns (callable, args[, kwargs])."""

    entry_file: str = ""
    function: str = ""
    text: str = ""

    def setup(self) -> None:
        mod = load_module_from_file(
            self.entry_file, self.text if self.entry_file == self.target_file else None
        )
        fn = mod
        for part in self.function.split("."):
            fn = getattr(fn, part, None)
        if not callable(fn):
            raise EntryError(
                f"{self.entry_file}: entry {self.function!r}: the file defines no such function; "
                f"define it there, or fix the FUNCTION part of FILE:FUNCTION ({ENTRY_CONTRACT})"
            )
        self.fn = fn

    def prepare(self) -> tuple[Callable[..., Any], list[tuple[str, Any, bool]]]:
        res = self.fn()
        if not isinstance(res, tuple) or len(res) not in (2, 3) or not callable(res[0]):
            code = getattr(self.fn, "__code__", None)
            where = f"{self.entry_file}:{code.co_firstlineno}" if code is not None else self.entry_file
            got = repr(res)
            got = got if len(got) <= 60 else got[:57] + "..."
            raise EntryError(
                f"{where}: entry {self.function}() returned {got} ({type(res).__name__}); {ENTRY_CONTRACT}"
            )
        call, args = res[0], tuple(res[1]) if isinstance(res[1], (tuple, list)) else (res[1],)
        kwargs = dict(res[2]) if len(res) == 3 else {}
        return call, _named_args(call, args, kwargs)


@dataclass
class TestProgram(Program):
    """``test:tests/test_x.py::test_y``: an argument-less test function. The checked file's own
    tests (``own_tests``) run from ``text``, the buffer being checked."""

    test_file: str = ""
    function: str = ""
    text: str | None = None  # the test file's source when it is the checked file itself

    def setup(self) -> None:
        self.fn = getattr(load_module_from_file(self.test_file, self.text), self.function)

    def prepare(self) -> tuple[Callable[..., Any], list[tuple[str, Any, bool]]]:
        return self.fn, []


@dataclass
class ProbeProgram(Program):
    """``probe:file.py:Name``: a Module class (built with ``ctor_args``) or a function, synthesized inputs."""

    qualname: str = ""
    ctor_args: tuple = ()
    # The constructor arguments as a witness's label writes them (``configs.constructor_text``):
    # a replay builds ``ctor_args`` from it, once the module is loaded.
    ctor_text: str = ""
    text: str = ""
    inputs: list[tuple[str, Any, bool]] = field(default_factory=list)  # set by probing or by a witness

    def setup(self) -> None:
        mod = load_module_from_file(self.target_file, self.text)
        self.obj = getattr(mod, self.qualname)
        if self.ctor_text and not self.ctor_args:
            self.ctor_args = constructor_args(self.ctor_text, vars(mod))
        self.is_module = isinstance(self.obj, type) and issubclass(self.obj, torch.nn.Module)
        self._state: dict[str, torch.Tensor] | None = None
        self._instance: Any = None

    def instance(self) -> Any:
        if not self.is_module:
            return self.obj
        if self._instance is None or self._state is None:  # both are set together, here
            seed_everything(self.seed)
            self._instance = self.obj(*self.ctor_args)
            self._state = {k: v.detach().clone() for k, v in self._instance.state_dict().items()}
        else:
            # Same weights every run, without paying for construction again.
            with torch.no_grad():
                for k, v in self._instance.state_dict().items():
                    v.copy_(self._state[k])
        return self._instance

    def prepare(self) -> tuple[Callable[..., Any], list[tuple[str, Any, bool]]]:
        return self.instance(), list(self.inputs)


# --- discovery ----------------------------------------------------------------


def project_root_for(path: str, given: str | None) -> str:
    if given:
        return os.path.abspath(given)
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if any(
            os.path.exists(os.path.join(d, m)) for m in ("pyproject.toml", "setup.py", "setup.cfg", ".git")
        ):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return os.path.dirname(os.path.abspath(path))
        d = parent


def add_import_dirs(path: str, root: str) -> list[str]:
    """Put the folders the program's imports resolve from on ``sys.path``; return those added.

    The file's own folder (a script importing its siblings), the folder above its package
    (``import proj.heads`` for ``src/proj/heads.py``), the project's ``src/`` and the project
    root: tests and entries elsewhere in the project import the file by those names.
    """
    folders = [
        os.path.dirname(os.path.abspath(path)),
        module_name_for(path)[0],
        os.path.join(root, "src"),
        root,
    ]
    added = []
    for d in folders:
        if os.path.isdir(d) and d not in sys.path:
            sys.path.insert(0, d)
            added.append(d)
    return added


@contextlib.contextmanager
def program_imports(path: str, text: str, root: str | None = None) -> Iterator[str]:
    """For one run in a long-lived child (replays, fix checks): the program's import folders on
    ``sys.path`` and ``path``'s module imported from ``text``; on exit everything the run imported
    from the project is dropped, so that the next run (another text) imports afresh. Yields the root."""
    target = os.path.abspath(path)
    root = root or project_root_for(path, None)
    added = add_import_dirs(target, root)
    finder = TextFinder(target, text)
    sys.meta_path.insert(0, finder)
    saved_modules = set(sys.modules)
    try:
        yield root
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - saved_modules:
            f = getattr(sys.modules.get(name), "__file__", None) or ""
            mine = bool(f) and os.path.abspath(f).startswith(root + os.sep) and "site-packages" not in f
            if name.startswith("_grist_") or mine:
                sys.modules.pop(name, None)
        for d in added:
            if d in sys.path:
                sys.path.remove(d)


def import_runs_loops(text: str) -> bool:
    """True when importing the file would run a top-level loop (a training script without a
    ``__main__`` guard): probing its functions would mean running the whole script again."""
    try:
        tree = parse(text)
    except UNPARSABLE:
        return False

    def is_main_guard(node: ast.AST) -> bool:
        return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)

    for node in tree.body:
        if is_main_guard(node):
            continue
        if any(
            isinstance(n, (ast.For, ast.While, ast.AsyncFor))
            for n in ast.walk(node)
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ):
            return True
    return False


def test_functions(file: str, src: str) -> list[tuple[str, str]]:
    """(test file, test function) for the argument-less, undecorated tests of one file."""
    try:
        tree = parse(src)
    except UNPARSABLE:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            a = node.args
            required = len(a.args) - len(a.defaults)
            if required == 0 and not a.kwonlyargs and not node.decorator_list:
                out.append((os.path.abspath(file), node.name))
    return out


def own_tests(path: str, text: str) -> list[tuple[str, str]]:
    """The argument-less tests of the checked file itself, when pytest would collect the file
    (``test_*.py``, ``*_test.py``): a test file is checked through its own tests first."""
    return test_functions(path, text) if is_test_file(os.path.basename(path)) else []


def test_entries(path: str, root: str) -> list[tuple[str, str]]:
    """(test file, test function) pairs for argument-less tests that import the file's module."""
    out = []
    for f, src in _resolved_importers(path, python_files(root, tests=True), root):
        out.extend(test_functions(f, src))
    return out


def importer_scripts(path: str, root: str) -> list[str]:
    """The project's scripts (top-level code beyond definitions) that import the file's module:
    how the project itself runs it, to be preferred over probes with made-up inputs."""
    return [
        os.path.abspath(f)
        for f, src in _resolved_importers(path, python_files(root, tests=False), root)
        if is_script(src)
    ]


def _resolved_importers(path: str, files: list[str], root: str) -> Iterator[tuple[str, str]]:
    """``importers`` whose imports really resolve to ``path``'s module (or to nothing installed).
    The pattern only names the module's stem: ``from app.model import`` matches for
    ``gpt/model.py`` too, and running the wrong tests costs their whole run. (The result cache
    keys a module by the pattern's matches, a superset of these.)"""
    for f, src in importers(path, files, root):
        if imports_into(Path(f), src, Path(root), Path(path)):
            yield f, src


def _shape_candidates(instance: Any) -> list[tuple[list[int], str]]:
    """(shape, 'float' | 'long:<n>') guesses for a module's main input, most specific first."""
    nn = torch.nn
    cands: list[tuple[list[int], str]] = []
    if isinstance(instance, nn.Module):
        for m in instance.modules():
            if isinstance(m, nn.Linear):
                cands.append(([BATCH, m.in_features], "float"))
                # Attention and sequence heads apply Linear to the last dimension of (B, T, d).
                cands.append(([BATCH, 8, m.in_features], "float"))
            elif isinstance(m, nn.Bilinear):
                cands.append(([BATCH, m.in1_features], "float"))
            elif isinstance(m, nn.Conv1d):
                cands.append(([BATCH, m.in_channels, 16], "float"))
            elif isinstance(m, nn.Conv2d):
                cands.append(([BATCH, m.in_channels, 16, 16], "float"))
                cands.append(([BATCH, m.in_channels, 32, 32], "float"))
            elif isinstance(m, nn.Conv3d):
                cands.append(([BATCH, m.in_channels, 8, 8, 8], "float"))
            elif isinstance(m, nn.Embedding):
                cands.append(([BATCH, 8], f"long:{m.num_embeddings}"))
            elif isinstance(m, nn.RNNBase):
                cands.append(
                    ([BATCH, 8, m.input_size] if m.batch_first else [8, BATCH, m.input_size], "float")
                )
            elif isinstance(m, nn.LayerNorm):
                cands.append(([BATCH, 8, *m.normalized_shape], "float"))
                cands.append(([BATCH, *m.normalized_shape], "float"))
            elif isinstance(m, nn.modules.batchnorm._BatchNorm):
                cands.append(([BATCH, m.num_features], "float"))
            else:
                continue
            break
    for s in ([BATCH, 8], [BATCH, 16], [BATCH, 10], [BATCH, 32], [BATCH, 3, 32, 32], [BATCH, 8, 16], [BATCH]):
        cands.append((s, "float"))
    return cands


def _classes_out(instance: Any) -> int:
    last = None
    if isinstance(instance, torch.nn.Module):
        for m in instance.modules():
            if isinstance(m, torch.nn.Linear):
                last = m.out_features
    return max(2, last or 3)


def synthesize(
    params: list[inspect.Parameter], instance: Any, seed: int
) -> list[list[tuple[str, Any, bool]]]:
    """Candidate argument lists for the required parameters, most plausible first."""
    n_classes = _classes_out(instance)
    out = []
    for shape, dtype in _shape_candidates(instance):
        g = torch.Generator().manual_seed(seed)
        args: list[tuple[str, Any, bool]] = []
        for p in params:
            name = p.name.lower()
            ann = p.annotation
            if ann in (int, "int") or name in ("dim", "axis", "n", "k") or name.startswith("num_"):
                args.append((p.name, 1, False))
            elif ann in (float, "float"):
                args.append((p.name, 1.0, False))
            elif dtype.startswith("long:") and not args:
                # A module whose first layer is an Embedding takes token ids first, whatever the
                # parameter is called (nanoGPT's ``idx`` is no class label).
                args.append((p.name, torch.randint(0, int(dtype[5:]), shape, generator=g), False))
            elif name in LABEL_NAMES:
                args.append((p.name, torch.randint(0, n_classes, shape[:1], generator=g), False))
            elif name in LENGTH_NAMES:
                longest = shape[1] if len(shape) > 1 else 8
                args.append((p.name, torch.randint(1, longest + 1, shape[:1], generator=g), False))
            elif name in MASK_NAMES:
                args.append((p.name, torch.ones(shape[:2], dtype=torch.bool), False))
            else:
                args.append((p.name, torch.randn(shape, generator=g), False))
        out.append(args)
    return out


def probe_programs(path: str, text: str, seed: int) -> list[ProbeProgram]:
    """Module classes then functions of the file, each with candidate inputs (several programs per object)."""
    target = os.path.abspath(path)
    base = ProbeBase(
        target_file=target, texts={target: text}, user_files=frozenset({target}), seed=seed, text=text
    )
    mod = load_module_from_file(target, text)
    progs: list[ProbeProgram] = []
    funcs: list[ProbeProgram] = []
    for name, obj in list(vars(mod).items()):
        if getattr(obj, "__module__", None) != mod.__name__ or name.startswith("_"):
            continue
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            progs.extend(_probe_class(path, name, obj, base, seed, vars(mod)))
        elif inspect.isfunction(obj) and not name.startswith("test"):
            try:
                params = [
                    p
                    for p in inspect.signature(obj).parameters.values()
                    if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
            except (TypeError, ValueError):
                continue
            if not params:
                continue
            flags = [p for p in inspect.signature(obj).parameters.values() if isinstance(p.default, bool)]
            for args in synthesize(params, None, seed):
                funcs.append(ProbeProgram(label=f"probe:{path}:{name}", qualname=name, inputs=args, **base))
            for flag in flags:
                # Code behind a flag (``if sublinear:``) runs only with the other value.
                for args in synthesize(params, None, seed)[:3]:
                    funcs.append(
                        ProbeProgram(
                            label=f"probe:{path}:{name}",
                            qualname=name,
                            inputs=args + [(flag.name, not flag.default, True)],
                            **base,
                        )
                    )
    return progs + funcs


def _constructors(cls: type, namespace: dict[str, Any]) -> Iterator[tuple]:
    """Constructor arguments to try, in order: none; 16s, then 8s; a synthesized config
    dataclass for each parameter that may take one (``GPT(GPTConfig(...))``, ``configs.py``),
    before the numbers when an annotation says so."""
    yield ()
    try:
        req = [
            p
            for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return
    if not req:
        return
    first = annotated_config(req, namespace)
    if first:
        yield from config_constructors(req, namespace, 16)
    yield tuple(16 for _ in req)
    yield tuple(8 for _ in req)
    if not first:
        yield from config_constructors(req, namespace, 16)


def _probe_class(
    path: str, name: str, cls: type, base: ProbeBase, seed: int, namespace: dict[str, Any]
) -> list[ProbeProgram]:
    instance = None
    ctor: tuple = ()
    shown: str | None = ""
    for ctor in _constructors(cls, namespace):
        shown = constructor_text(ctor, namespace) if ctor else ""
        if shown is None:  # a replay could not rebuild these arguments
            continue
        try:
            seed_everything(seed)
            instance = cls(*ctor)
            break
        except Exception:
            instance = None
    if instance is None or shown is None:
        return []
    label = f"probe:{path}:{name}{shown}"
    out = []
    example = getattr(instance, "example_input_array", None)
    if isinstance(example, torch.Tensor) or (isinstance(example, (tuple, list)) and example):
        ex = example if isinstance(example, (tuple, list)) else (example,)
        out.append(
            ProbeProgram(
                label=label,
                qualname=name,
                ctor_args=ctor,
                inputs=_named_args(instance.forward, tuple(ex), {}),
                **base,
            )
        )
    try:
        params = [
            p
            for p in inspect.signature(instance.forward).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return out
    for args in synthesize(params, instance, seed):
        out.append(ProbeProgram(label=label, qualname=name, ctor_args=ctor, inputs=args, **base))
    return out


def parse_entry(spec: str, root: str) -> tuple[str, str]:
    """``path.py:function`` -> (absolute path, function); relative paths are from the project root."""
    file, sep, func = spec.rpartition(":")
    if not sep or not file.endswith(".py") or not func:
        raise EntryError(f"entry {spec!r}: expected 'path/to/file.py:function'")
    for base in (root, os.getcwd()):
        cand = file if os.path.isabs(file) else os.path.join(base, file)
        if os.path.exists(cand):
            return os.path.abspath(cand), func
    raise EntryError(f"entry {spec!r}: file {file} not found (relative paths are from {root})")


def program_from_label(
    label: str,
    path: str,
    text: str,
    seed: int,
    inputs: dict[str, Any] | None = None,
    argv: list[str] | None = None,
) -> Program:
    """Rebuild the Program a witness names (for replay). ``inputs``: name -> value, for probes;
    ``argv``: the command-line arguments a script ran with (``Witness.argv``)."""
    target = os.path.abspath(path)
    kind, _, rest = label.partition(":")
    texts = {target: text}
    if kind == "script":
        return ScriptProgram(
            label=label,
            target_file=target,
            texts=texts,
            user_files=frozenset({target}),
            seed=seed,
            text=text,
            argv=list(argv or []),
        )
    if kind == "entry":
        file, _, func = rest.rpartition(":")
        file = os.path.abspath(file)
        return EntryProgram(
            label=label,
            target_file=target,
            texts=texts,
            user_files=frozenset({target, file}),
            seed=seed,
            entry_file=file,
            function=func,
            text=text,
        )
    if kind == "test":
        file, _, func = rest.partition("::")
        file = os.path.abspath(file)
        return TestProgram(
            label=label,
            target_file=target,
            texts=texts,
            user_files=frozenset({target, file}),
            seed=seed,
            test_file=file,
            function=func,
            text=text if file == target else None,
        )
    if kind == "run":
        file = os.path.abspath(rest)
        return RunProgram(
            label=label,
            target_file=target,
            texts=texts,
            user_files=frozenset({target, file}),
            seed=seed,
            script_file=file,
            argv=list(argv or []),
        )
    if kind == "probe":
        m = re.fullmatch(r"(.*\.py):([\w.]+)(\(.*\))?", rest)
        if not m:
            raise EntryError(f"witness entry {label!r}: expected 'probe:file.py:Name'")
        # By name: a flag passed by keyword during probing may not be the next positional parameter.
        # Tensors the probed code makes itself (``torch.randn_like`` in a forward) are substituted
        # by key, not passed.
        named = [
            (k, v, not re.fullmatch(r"arg\d+", k)) for k, v in (inputs or {}).items() if not is_factory_key(k)
        ]
        return ProbeProgram(
            label=label,
            target_file=target,
            texts=texts,
            user_files=frozenset({target}),
            seed=seed,
            qualname=m.group(2),
            ctor_text=m.group(3) or "",
            text=text,
            inputs=named,
        )
    raise EntryError(f"witness entry {label!r}: unknown kind {kind!r} (script, run, entry, test, probe)")
