"""What a generated reproducer runs: watch one site, then fail, pass, or refuse to judge.

A reproducer must never pass by accident. Running the program with the witness ends in one of:

* **fail** -- the op at the site turns finite operands into NaN/INF again (or, for a backward
  witness, its local gradient is non-finite); an operand already NaN/INF when it reaches the
  site fails too (the program is still broken, just earlier); and when a fix rewrote the op
  away (its lines still run, the op is no longer there), a NaN made anywhere in the program's
  files, or a non-finite output, loss or gradient;
* **pass** -- the site was evaluated with finite results and the program ran through;
* **cannot judge** (``CannotJudge``) -- the program raised, does not parse, or no longer runs
  the site's lines. The reproducer raises it from a pytest fixture, so pytest reports an
  *error* (exit status 1), never a pass.

It also says how a program runs here (``RunHere``, ``on_cpu``): a program written for a GPU on a
machine without one, its DataLoaders in its own process, and the drawing packages it imports
where they are not installed. The engine's Tracer runs programs
the same way, so a witness found here replays the same way.

This module imports nothing of grist-lsp and is written without ``from __future__`` on
purpose: plain reproducers carry its source inline, so they run where only torch and pytest
are installed; replay reproducers (which need grist-lsp anyway) import it.
"""

import ast
import importlib.abc
import importlib.machinery
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

# What torch.linalg raises for a matrix it cannot factor (documented as torch.linalg.LinAlgError;
# torch's stubs do not re-export the name, hence the one ignore).
LinAlgError: type[Exception] = torch.linalg.LinAlgError  # pyright: ignore[reportPrivateImportUsage]
# How many findings of each sort an Observation keeps: the first one is what the user reads.
KEEP = 3
# Programs written for a GPU call .cuda(), pass device="cuda" and move with .to("cuda:0"); on a
# torch without CUDA each raises "Torch not compiled with CUDA enabled" before any site runs.
CUDA_MISSING = not torch.cuda.is_available()


def _is_cuda(v: Any) -> bool:
    if isinstance(v, str):
        return v.startswith("cuda")
    return isinstance(v, torch.device) and v.type == "cuda"


def _same(t: Any) -> Any:
    return t


def _sum_of(tensors: list) -> Any:
    """One scalar whose backward sends a unit gradient to every entry of every tensor."""
    total = tensors[0].sum()
    for t in tensors[1:]:
        total = total + t.sum()
    return total


_LEGACY_TYPES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")


def _in_process(init: Callable[..., None]) -> Callable[..., None]:
    """``DataLoader.__init__`` with no worker processes, and without the options that torch
    refuses once there are none (a prefetch factor, persistent workers, a start method)."""

    def in_process(*args: Any, **kwargs: Any) -> None:
        # Bound here, not when the mode is entered: every run enters it, few make a DataLoader.
        bound = inspect.signature(init).bind(*args, **kwargs)
        bound.arguments.update(num_workers=0, prefetch_factor=None, persistent_workers=False)
        bound.arguments.pop("multiprocessing_context", None)
        init(*bound.args, **bound.kwargs)

    return in_process


# Factories that hand out memory as it was: `nn.Linear` makes its weight with `torch.empty` and
# then initialises it in place, so a NaN bit pattern there says nothing of the program.
_UNINITIALISED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})

# Drawing and dashboard packages: what their calls return is only ever drawn, saved or shown.
# (Not tqdm, wandb or tensorboard: a progress bar wraps the data loop, and a config or a version
# read from them steers the program.)
DISPLAY_ONLY = frozenset({"matplotlib", "seaborn", "visdom", "plotly", "tensorboardX"})

# ``fig, ax = plt.subplots()`` and ``fig, (a, b) = plt.subplots(1, 2)`` unpack a stand-in.
_UNPACKED = 2


class StandIn:
    """Whatever a display call returns: callable, indexable, iterable, a context manager."""

    def __call__(self, *args: Any, **kwargs: Any) -> "StandIn":
        return self

    def __getattr__(self, name: str) -> "StandIn":
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, key: Any) -> "StandIn":
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        return None

    def __iter__(self) -> "Iterator[StandIn]":
        return iter([self] * _UNPACKED)

    def __enter__(self) -> "StandIn":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return StandIn()


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []  # a package: ``import matplotlib.pyplot`` resolves below it
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class AbsentDisplayFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: reached only when no real finder has the module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] not in DISPLAY_ONLY:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def stand_in_for_absent_display() -> None:
    """Serve the display-only packages this machine lacks from stand-ins, in this process.

    Drawing and dashboard packages (``DISPLAY_ONLY``) give nothing back to the computation, so a
    program that imports one still runs where it is absent (a CI runner, a slim container). The
    finder sits last on ``sys.meta_path``: an installed package is always the real one, and a
    program that uses a drawing's value as data (``plt.imread``) fails at that line as it would
    have failed to import."""
    if not any(isinstance(f, AbsentDisplayFinder) for f in sys.meta_path):
        sys.meta_path.append(AbsentDisplayFinder())


class RunHere(TorchFunctionMode):
    """A mode under which a program runs here: in one process, on this CPU when CUDA is missing.

    Its subclasses pass each call through ``on_cpu``. While it is entered, what is not a torch
    call is stood in for, by module attributes swapped for that time and put back on exit:

    * a DataLoader loads its batches in the program's process (``num_workers=0``). Worker
      processes would run the dataset's code outside the tracer, start anew each epoch, and
      talk to the program over sockets the sandbox refuses. The batches are the same; random
      augmentations draw in another order.
    * a CUDA autocast region the program opens (``torch.autocast("cuda")``,
      ``torch.cuda.amp.autocast()``) is a CPU one in the dtype CUDA would use (float16 unless
      the program says), so float16 products overflow as they do on the GPU;
    * the legacy ``torch.cuda.FloatTensor`` types are the CPU ones;
    * a drawing package the machine lacks is a stand-in (``stand_in_for_absent_display``).
    """

    def __enter__(self) -> Any:
        stand_in_for_absent_display()
        self._swapped: list[tuple[Any, str, Any]] = []
        loader = torch.utils.data.DataLoader
        self._swap(loader, "__init__", _in_process(loader.__init__))
        if CUDA_MISSING:
            cls = torch.amp.autocast_mode.autocast
            original = cls.__init__

            def init(
                self: Any,
                device_type: str,
                dtype: Any = None,
                enabled: bool = True,
                cache_enabled: Any = None,
            ) -> None:
                if device_type == "cuda":
                    device_type, dtype = "cpu", torch.float16 if dtype is None else dtype
                original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

            self._swap(cls, "__init__", init)
            for kind in _LEGACY_TYPES:
                self._swap(torch.cuda, f"{kind}Tensor", getattr(torch, f"{kind}Tensor"))
        return super().__enter__()

    def _swap(self, owner: Any, name: str, value: Any) -> None:
        self._swapped.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            for owner, name, value in reversed(self._swapped):
                setattr(owner, name, value)


def on_cpu(name: str, func: Any, args: tuple, kwargs: dict) -> tuple[str, Any, tuple, dict]:
    """The call to run instead of ``func(*args, **kwargs)`` (named ``name``), as (name, func,
    args, kwargs): itself, unless CUDA is missing and the call asks for it. Then it runs on the
    CPU: the same op in the same dtype. ``.cuda()`` becomes a copy (``.to("cpu", copy=True)``),
    as it is one on a GPU too. (CUDA autocast regions and legacy CUDA types: ``RunHere``.)"""
    if not CUDA_MISSING:
        return name, func, args, kwargs
    if name == "torch.Tensor.cuda" and args:
        return "torch.Tensor.to", torch.Tensor.to, (args[0], "cpu"), {"copy": True}
    if name == "torch.Tensor.pin_memory" and args:
        return name, _same, args[:1], {}
    if _is_cuda(kwargs.get("device")):
        kwargs = {**kwargs, "device": "cpu"}
    if name == "torch.Tensor.to" and len(args) > 1 and _is_cuda(args[1]):
        args = (args[0], "cpu", *args[2:])
    if name == "torch.Tensor.type" and len(args) > 1 and isinstance(args[1], str):
        args = (
            args[0],
            args[1].replace("torch.cuda.", "torch."),
            *args[2:],
        )  # .type("torch.cuda.FloatTensor")
    return name, func, args, kwargs


class CannotJudge(Exception):
    """The program raised, does not parse, or no longer reaches the site: neither pass nor fail."""


@dataclass(frozen=True)
class WatchedSite:
    """The op a reproducer watches, found by function and line within that function."""

    program: Path  # the file holding the site
    function: str  # co_qualname of the code holding the site ("<module>" at module level)
    lines: tuple[int, ...]  # the site's lines, counted from the function's first line
    ops: frozenset[str]  # runtime names of the site's kind (``x / y`` runs as torch.Tensor.div)
    label: str  # "torch.log at train.py:12", for messages
    backward: bool = False  # the witness fails in the backward pass: judge the local gradient
    masked: bool = False  # -inf operands are legitimate here (masked softmax): only NaN is upstream
    # The op fails by raising torch.linalg.LinAlgError (cholesky of a matrix that is not positive
    # definite): that error, raised at the site from finite operands, is the failure.
    raises: bool = False
    program_files: frozenset[Path] = frozenset()  # other user files whose NaNs count (the entry file)


@dataclass
class Observation:
    """What one run of the program showed."""

    raised: str | None = None  # the program stopped with this exception ("NameError: x")
    site_evaluated: int = 0  # evaluations of the site's op
    site_bad: list[str] = field(default_factory=list)  # non-finite results at the site
    upstream: str | None = None  # an operand of the site was already non-finite
    lines_ran: bool = False  # some torch call ran on the site's lines (the op may be rewritten)
    program_bad: list[str] = field(default_factory=list)  # non-finite values elsewhere, outputs, gradients

    def note(self, bucket: list[str], message: str) -> None:
        if len(bucket) < KEEP:
            bucket.append(message)


def _resolved(filename: str, cache: dict[str, Path | None]) -> Path | None:
    if filename not in cache:
        try:
            cache[filename] = Path(filename).resolve()
        except (OSError, RuntimeError):
            cache[filename] = None
    return cache[filename]


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _floating(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t for t in tensors if t.is_floating_point() or t.is_complex()]


def _shown(t: torch.Tensor) -> list[Any]:
    return t.detach().flatten()[:8].tolist()


class Observer(RunHere):
    """Sees every torch call the program makes; judges the ones on the site's lines.

    ``watch_site=False`` when the engine's replay judges the site itself (it substitutes
    inputs by creation site): the observer then only notes whether the site's lines still run
    and whether the program makes non-finite values elsewhere.
    """

    def __init__(self, site: WatchedSite, observation: Observation, watch_site: bool = True) -> None:
        super().__init__()
        self.site = site
        self.obs = observation
        self.watch_site = watch_site
        self._paths: dict[str, Path | None] = {}
        self._program = site.program.resolve()
        self._user = {self._program} | {p.resolve() for p in site.program_files}

    def _user_frame(self) -> Any:
        """The innermost frame of the user's files that led to this call, or None."""
        frame = sys._getframe(2)
        while frame is not None:
            if _resolved(frame.f_code.co_filename, self._paths) in self._user:
                return frame
            frame = frame.f_back
        return None

    def _at_site(self, frame: Any) -> bool:
        if _resolved(frame.f_code.co_filename, self._paths) != self._program:
            return False
        # a comprehension or lambda in the function runs as its own code object: look past it
        while frame is not None and frame.f_code.co_qualname.startswith(self.site.function + ".<locals>.<"):
            frame = frame.f_back
        if frame is None or frame.f_code.co_qualname != self.site.function:
            return False
        return frame.f_lineno - frame.f_code.co_firstlineno in self.site.lines

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name, func, args, kwargs = on_cpu(
            resolve_name(func) or getattr(func, "__name__", ""), func, args, kwargs or {}
        )
        try:
            out = func(*args, **kwargs)
        except LinAlgError as failure:
            self._judge_raised(func, args, kwargs, failure)
            raise
        frame = self._user_frame()
        if frame is None:
            return out  # torch's own work (parameter init) or the engine's
        at_site = self._at_site(frame)
        if at_site:
            self.obs.lines_ran = True
        operands = _floating(_tensors(list(args) + list(kwargs.values())))
        if at_site and self.watch_site and name in self.site.ops:
            self._judge_site(func, name, args, kwargs, operands, out)
        else:
            self._judge_elsewhere(name, operands, out, frame)
        if name == "torch.Tensor.backward" and args and isinstance(args[0], torch.Tensor):
            self.judge_gradients(args[0])
        return out

    def _judge_raised(self, func: Any, args: tuple, kwargs: dict, failure: BaseException) -> None:
        """The op raised: the site's failure when it is the site's op, on its lines, of a kind that
        fails by raising, with finite operands (else the program just raised: cannot judge)."""
        frame = self._user_frame()
        if frame is None or not self.site.raises or not self.watch_site or not self._at_site(frame):
            return
        name = resolve_name(func) or getattr(func, "__name__", "")
        operands = _floating(_tensors(list(args) + list(kwargs.values())))
        if name in self.site.ops and all(torch.isfinite(a).all() for a in operands):
            self.obs.site_evaluated += 1
            self.obs.note(
                self.obs.site_bad, f"{self.site.label}: {name} raised {type(failure).__name__}: {failure}"
            )

    def _judge_site(
        self, func: Any, name: str, args: tuple, kwargs: dict, operands: list[torch.Tensor], out: Any
    ) -> None:
        self.obs.site_evaluated += 1
        upstream = [
            a for a in operands if (torch.isnan(a).any() if self.site.masked else not torch.isfinite(a).all())
        ]
        if upstream:
            if self.obs.upstream is None:
                self.obs.upstream = (
                    f"{self.site.label}: an operand was already non-finite when it reached the "
                    f"site ({_shown(upstream[0])}): the program still fails, earlier than the site"
                )
            return
        if not self.site.backward:
            for t in _floating(_tensors(out)):
                bad = torch.isnan(t).any() if self.site.masked else not torch.isfinite(t).all()
                if bad:
                    self.obs.note(self.obs.site_bad, f"{self.site.label}: {name} returned {_shown(t)}")
            return
        # backward witness: the op's own gradient (at this evaluation) must be finite
        leaves = [
            a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args
        ]
        with torch.enable_grad():
            local = func(*leaves, **kwargs)
            wrt = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
            # A decomposition returns a tuple (eigh: values and vectors): every output counts.
            outs = [t for t in _floating(_tensors(local)) if t.requires_grad]
            if outs and wrt:
                for g in torch.autograd.grad(_sum_of(outs), wrt, allow_unused=True):
                    if g is not None and not torch.isfinite(g).all():
                        self.obs.note(
                            self.obs.site_bad, f"{self.site.label}: the gradient of {name} is {_shown(g)}"
                        )

    def _judge_elsewhere(self, name: str, operands: list[torch.Tensor], out: Any, frame: Any) -> None:
        if name.rpartition(".")[2] in _UNINITIALISED:
            return  # whatever the memory held: NaN bits in a buffer the program then fills are no bug
        where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
        # INF alone is no verdict here (a mask filled with -inf is fine); it shows up in the
        # outputs, the loss or the gradients if it matters, and a NaN is never fine.
        for t in _floating(_tensors(out)):
            if torch.isnan(t).any() and not any(torch.isnan(a).any() for a in operands):
                self.obs.note(self.obs.program_bad, f"{name} at {where} returned nan ({_shown(t)})")

    def judge_gradients(self, loss: torch.Tensor) -> None:
        """After ``loss.backward()``: the loss and the gradients of the leaves it reaches."""
        if not torch.isfinite(loss.detach()).all():
            self.obs.note(self.obs.program_bad, f"the loss is {_shown(loss)}")
        seen: set[int] = set()
        todo = [loss.grad_fn] if loss.grad_fn is not None else []
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            leaf = getattr(node, "variable", None)  # AccumulateGrad: a leaf the backward writes .grad of
            if (
                isinstance(leaf, torch.Tensor)
                and leaf.grad is not None
                and not torch.isfinite(leaf.grad).all()
            ):
                self.obs.note(
                    self.obs.program_bad, f"a gradient of shape {list(leaf.shape)} is {_shown(leaf.grad)}"
                )
            todo.extend(n for n, _ in getattr(node, "next_functions", ()))


def observe(site: WatchedSite, call: Callable[[], Any], watch_site: bool = True) -> tuple[Observation, Any]:
    """Run ``call`` under an Observer; its non-finite outputs (and their gradients) count too."""
    obs = Observation()
    observer = Observer(site, obs, watch_site)
    result = None
    try:
        with observer:
            result = call()
            outputs = _floating(_tensors(result))
            for t in outputs:
                if not torch.isfinite(t.detach()).all():
                    obs.note(obs.program_bad, f"the program's output is {_shown(t)}")
            trainable = [t for t in outputs if t.requires_grad and torch.isfinite(t.detach()).all()]
            if trainable and not obs.site_bad:
                total = _sum_of(trainable)
                try:
                    total.backward()
                except RuntimeError:
                    pass  # the program already ran backward through this graph (and was watched then)
                else:
                    observer.judge_gradients(total)
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:
        if exc.code not in (None, 0):
            obs.raised = f"SystemExit: {exc.code}"
    except BaseException as exc:  # the user's program failed: judge() says what that means
        obs.raised = f"{type(exc).__name__}: {exc}"
    return obs, result


def apply_replay(obs: Observation, result: Any) -> None:
    """Fold the engine's replay result (a ``ReplayResult``) into ``obs``."""
    if result.reproduced:
        obs.note(obs.site_bad, result.detail)
    elif getattr(result, "upstream", False):
        obs.upstream = result.detail
    elif getattr(result, "raised", None):
        obs.raised = result.raised
    elif result.result != "not-reached":
        obs.site_evaluated += 1


def judge(site: WatchedSite, obs: Observation) -> list[str]:
    """Why the test fails (empty: it passes); raises CannotJudge when the run says nothing."""
    if obs.site_bad:
        return list(obs.site_bad)
    if obs.upstream:
        return [obs.upstream]
    if obs.raised:
        raise CannotJudge(
            f"cannot judge {site.label}: the program raised {obs.raised} before the check could finish. "
            f"Make {site.program.name} run again (or delete this test if the code it checks is gone)."
        )
    if obs.site_evaluated:
        return []
    if obs.lines_ran:  # the op was rewritten away: the program's values decide
        return [f"{site.label} (rewritten): {m}" for m in obs.program_bad]
    raise CannotJudge(
        f"cannot judge {site.label}: the program ran without running that line. If the code moved to "
        f"another function, create the reproducer again; if it is gone, delete this test."
    )


def moved_by(source: str, function: str, recorded_first: int, line_text: str, recorded_line: int) -> int:
    """How many lines the site moved since the witness was found (an import added above it).

    Inside a function: as far as the function's first line moved. At module level: to the
    nearest line that still reads exactly as the site's line did, if any.
    """
    if function != "<module>":
        first = code_first_line(source, function)
        return 0 if first is None else first - recorded_first
    lines = source.splitlines()
    same = [i + 1 for i, text in enumerate(lines) if text.strip() and text.strip() == line_text.strip()]
    return min((n - recorded_line for n in same), key=abs, default=0)


def code_first_line(source: str, qualname: str) -> int | None:
    """First line (as ``co_firstlineno`` counts it, decorators included) of the function with
    code qualname ``qualname`` in ``source``; 1 for ``<module>``; None if it is not there."""
    if qualname == "<module>":
        return 1
    try:
        # This module imports nothing of grist-lsp (see the docstring), so not its parse().
        tree = ast.parse(source)  # noqa: TID251
    except SyntaxError:
        return None

    def walk(body: list[ast.stmt], prefix: str) -> int | None:
        for node in body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            name = prefix + node.name
            if name == qualname and not isinstance(node, ast.ClassDef):
                return min([node.lineno] + [d.lineno for d in node.decorator_list])
            found = walk(node.body, name + (".<locals>." if not isinstance(node, ast.ClassDef) else "."))
            if found is not None:
                return found
        return None

    return walk(tree.body, "")
