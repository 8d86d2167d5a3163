"""GRIST's own setting: follow a training program's own training and steer its inputs in place.

A training program evaluates its unsafe ops again and again in a loop, and its NaN usually needs
the state that training reaches (logits beyond ~100 after thousands of SGD steps). Aborting each
run at the op's first evaluation, as the per-site search does, never reaches that state. Here the
program runs once, as written:

* every candidate site of the file is watched at every evaluation; the run stops at the first one
  whose operands are finite and whose output (or local gradient) is not (the same oracle as
  ``tracing``), or when a value arrives non-finite from upstream (nothing more to learn);
* the program's own optimizer trains its weights: that state is reachable by definition, so
  those moves are not bounded, and the witness says after how many steps it was reached;
* GRIST's piggy-back: at each evaluation of the current target site the objective's gradient
  (``Region.distance``) is taken w.r.t. the program's inputs (tensors that enter torch from
  outside, and tensors made trainable that no optimizer updates: free logits), and after the
  program's own ``backward`` the inputs take a signed step, in place, within their domain (100x
  the range the program gave them, as the per-site search). Steps are applied only between
  iterations, so the inputs a failing forward pass used are exactly the witness's;
* the target is the candidate site closest to its region relative to where it started; a target
  that stops getting closer is set aside for a while.

The failing state (inputs, and every weight as training left it) is what a replay needs: run the
program once with those inputs and weights, and the target fails at its first evaluation.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.weak import WeakTensorKeyDictionary

from grist_lsp.analyzer.catalogue import Op
from grist_lsp.model import Site

from .budget import cap_clock
from .tracing import BACKWARD, RunStopped, SiteOutcome, TargetReached, Tracer, TracerConfig, trace_call

STEP_START = 0.01  # first signed step, as a share of an input's bound / 10 (the per-site search's scale)
STEP_MAX = 0.5
STEP_MIN = 1e-4
PATIENCE = 100  # iterations without a new best distance before a target is set aside
SET_ASIDE = 300  # iterations it stays aside


class TrainingStopped(RunStopped):
    """Raised inside the program when the run has used its time or steps."""


@dataclass
class TrainingSettings:
    seconds: float  # the safety cap: CPU seconds for the whole run (``budget.cap_clock``)
    max_steps: int = 1_000_000  # the budget: a run stops after this many training steps
    bound_factor: float = 100.0  # inputs stay within this times max(1, max|x|) of the program's own


@dataclass
class Movable:
    """An input the run steers in place: ``live`` is what the program holds, ``leaf`` what the
    objective's gradient is taken against (``live`` is its clone, so the graph reaches it)."""

    leaf: torch.Tensor
    live: torch.Tensor
    bound: float
    pending: torch.Tensor | None = None  # sign of the last target gradient, applied after backward


@dataclass
class Progress:
    """How close one site has come to its invalid region."""

    first: float
    best: float
    best_at: int
    aside_until: int = -1


@dataclass
class TrainingFound:
    outcome: SiteOutcome
    inputs: dict[str, torch.Tensor]  # input key -> value in the failing iteration
    deltas: dict[str, torch.Tensor]  # parameter key -> its value in the failing iteration minus at entry
    weights: dict[str, torch.Tensor]  # parameter key -> its exact value in the failing iteration (moved ones)
    param_names: dict[str, str]
    steps: int  # training iterations before the failing one
    seconds: float


@dataclass
class TrainingReport:
    found: TrainingFound | None
    steps: int
    seconds: float
    note: str
    error: BaseException | None = None
    reached: set[str] = field(default_factory=set)
    # A run is deterministic (seeded, steps taken between iterations): one its budget did not stop
    # ends the same way when run again for the same targets, and one that steered nothing ends the
    # same way for any targets (its targets only choose what is steered).
    timed_out: bool = False  # the clock (the safety cap) stopped it
    steered: bool = False
    out_of_steps: bool = False  # its budget of steps stopped it


class TrainingTracer(Tracer):
    """The mode of one training run: watches every site at every evaluation and steers inputs."""

    def __init__(self, cfg: TracerConfig, settings: TrainingSettings, targets: set[str]) -> None:
        super().__init__(cfg)
        self.settings = settings
        self.targets = set(targets)
        self.deadline = cap_clock() + settings.seconds  # CPU seconds: see ``budget.cap_clock``
        self.t0 = time.monotonic()
        self.inputs: dict[str, Movable] = {}
        self._first_step: dict[str, int] = {}  # the line an input was made at -> the step it first was
        self.initial: dict[str, torch.Tensor] = {}  # parameter key -> value at first sight
        # Weights rebound each step (``_rebound``): variable name -> the key of its first and its
        # latest tensor, and each latest key -> the first.
        self._slot_first: dict[str, str] = {}
        self._slot_latest: dict[str, str] = {}
        self._rebinding: dict[str, str] = {}
        self.progress: dict[str, Progress] = {}
        self.target: str | None = None
        self.a = STEP_START
        self.found: TrainingFound | None = None
        self.stop_note = ""
        self.timed_out = False
        self.out_of_steps = False
        self.steered = False  # an input took a step
        # Inside a step of one of torch's own optimizers: its ops touch weights, gradients and
        # optimizer state only, with nothing to watch or steer, and half a training step's
        # tracing went to them.
        self.in_library_step = False
        # Tensors a factory made (``torch.zeros(2, 1, requires_grad=True)``), and their substitutes:
        # a weight made anew, never a step of manual training (``_rebound``).
        self.factory_made: WeakTensorKeyDictionary = WeakTensorKeyDictionary()

    # --- inputs and weights -------------------------------------------------------

    def _external_value(self, key: str, original: torch.Tensor) -> torch.Tensor:
        base = key.rpartition("#")[0]  # "file.py:line:name": the line that made it
        if self._first_step.setdefault(base, self.steps) < self.steps and key not in self.inputs:
            # The loop makes this tensor anew every iteration (a batch from numpy, a Dataset's
            # items): a step on it would never be used, and keeping each would grow without end.
            return original
        if self.cfg.record and key not in self.recorded:
            self.recorded[key] = original.detach().clone()
        self.used_inputs.append(key)
        if not torch.is_floating_point(original) or not original.numel() or key in self.inputs:
            return original
        leaf = original.detach().clone().requires_grad_(True)
        live = leaf.clone()
        bound = self.settings.bound_factor * max(1.0, float(original.detach().abs().max()))
        self.inputs[key] = Movable(leaf, live, bound)
        return live

    def _factory(self, name: str, out: Any) -> Any:
        made = super()._factory(name, out)
        if isinstance(out, torch.Tensor):
            self.factory_made[out] = True
            self.factory_made[made] = True
        return made

    def _parameter(self, p: torch.Tensor) -> torch.Tensor:
        known = id(p) in self._params or self._alias_of(p) is not None
        out = super()._parameter(p)
        if not known:
            key = self._params[id(p)][1]
            self.initial[key] = p.detach().clone()
            self._rebound(key, p)
        return out

    def _rebound(self, key: str, p: torch.Tensor) -> None:
        """Manual training by rebinding (``W = W - lr * W.grad`` under no_grad, then
        ``W.requires_grad_(True)``) makes each step's weight a new tensor, held by the same
        variable. It is the same weight: its value in the failing step is a move of the first
        tensor of that name (what a replay can put back, at the first sight of that tensor), and
        the tensors it replaced are dropped, or every step would keep one more."""
        name = self.param_names.get(key) if key in self._named_by_variable else None
        if name is None:
            return
        if p in self.factory_made:
            # A tensor straight from a factory is a new weight of that name (a second model built
            # after the first, ``W = torch.zeros(2, 1, requires_grad=True)`` again), not a step:
            # the steps that rebind it from here on are its own.
            self._slot_first[name] = key
            self._slot_latest.pop(name, None)
            return
        first = self._slot_first.setdefault(name, key)
        if first == key or self.initial[first].shape != p.shape:
            return
        previous = self._slot_latest.get(name)
        self._slot_latest[name] = key
        self._rebinding[key] = first
        if previous is not None:
            self._params = {i: (q, k) for i, (q, k) in self._params.items() if k != previous}
            self._by_view = {v: (q, k) for v, (q, k) in self._by_view.items() if k != previous}
            self.initial.pop(previous, None)
            self.inputs.pop(previous, None)
            self._rebinding.pop(previous, None)

    def _keeps_graphs(self) -> bool:
        return True

    def _input_leaves(self) -> set[int]:
        # The inputs this run steers are leaves made from the program's data (a free logit
        # steered as an input is the program's own trainable tensor, its leaf is itself).
        return super()._input_leaves() | {id(m.leaf) for m in self.inputs.values() if m.leaf is not m.live}

    def _free_leaves(self) -> dict[str, torch.Tensor]:
        """Tensors the program made trainable that no optimizer updates: data (free logits), moved as inputs."""
        free = self.free_params()
        return {key: p for p, key in self._params.values() if key in free}

    @contextlib.contextmanager
    def optimizers_noted(self) -> Iterator[None]:
        """For the run: know when one of torch's own optimizers steps (its ops are not traced)."""
        tracer = self

        def step_begins(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            # A user's own optimizer class may hold sites of the checked file: it stays traced.
            tracer.in_library_step = type(optimizer).__module__.startswith("torch.optim.")

        def step_ends(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            tracer.in_library_step = False

        hooks = [
            register_optimizer_step_pre_hook(step_begins),
            register_optimizer_step_post_hook(step_ends),
        ]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()

    # --- the mode -----------------------------------------------------------------

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        backward = self._name(func) in BACKWARD
        if self.in_library_step and not backward:
            return func(*args, **(kwargs or {}))
        # No optimizer step calls backward: one that raised (and was caught) ends its bypass here.
        self.in_library_step = False
        out = super().__torch_function__(func, types, args, kwargs)
        if backward:
            self._after_backward()
        return out

    def _at_site(self, func: Any, rows: list[Op], args: tuple, kwargs: dict) -> Any:
        picked = self._sites_among(rows, lambda s: s.key in self._watched, lambda s: s.key in self.targets)
        if not picked:
            return func(*args, **kwargs)
        op, site, pos = picked[0]
        steer = site.key in self.targets
        out, outcome = self._evaluate(site, func, op, args, kwargs, pos, with_distance=steer)
        self.reached.setdefault(site.key, outcome)
        if outcome.found:
            if site.key in self.targets:
                self.found = self._state(outcome)
                raise TargetReached(outcome)
            self.stop_note = f"line {site.span.start_line} ({site.op}) failed first, as found before"
            raise TrainingStopped()
        if outcome.result == "upstream":
            self.stop_note = (
                f"a non-finite value reached line {site.span.start_line} ({site.op}) from an "
                "operation that is no candidate site"
            )
            raise TrainingStopped()
        if steer and outcome.distance is not None:
            self._note_distance(site.key, outcome.distance)
        self._check_limits()
        return out

    def _note_distance(self, key: str, distance: torch.Tensor) -> None:
        d = float(distance.detach())
        if d != d:
            return
        p = self.progress.get(key)
        if p is None:
            p = self.progress[key] = Progress(d, d, self.steps)
        elif d < p.best:
            p.best, p.best_at = d, self.steps
        if self.target is None or self.target not in self.targets:
            self.target = key
        if key != self.target or not distance.requires_grad:
            return
        movable = {k: m.leaf for k, m in self.inputs.items()}
        movable.update(self._free_leaves())
        if not movable:
            return
        keys = list(movable)
        try:
            grads = torch.autograd.grad(
                distance, [movable[k] for k in keys], retain_graph=True, allow_unused=True
            )
        except RuntimeError:
            return
        for k, g in zip(keys, grads):
            if g is None or not bool(torch.isfinite(g).all()):
                continue
            m = self.inputs.get(k)
            if m is not None:
                m.pending = torch.sign(g)
            else:
                leaf = movable[k]
                self.inputs[k] = Movable(
                    leaf,
                    leaf,
                    self.settings.bound_factor * max(1.0, float(self.initial.get(k, leaf).abs().max())),
                    torch.sign(g),
                )

    def _after_backward(self) -> None:
        """An iteration ended (the base mode counted it): the inputs take their step, the next target is chosen."""
        cur = self.progress.get(self.target) if self.target else None
        improved = cur is not None and cur.best_at == self.steps - 1
        self.a = min(self.a * 1.2, STEP_MAX) if improved else max(self.a * 0.7, STEP_MIN)
        with torch.no_grad():
            for m in self.inputs.values():
                if m.pending is None:
                    continue
                step = self.a * m.bound / 10.0
                # ``.data``: the program's saved tensors keep their version, so its backward still runs.
                m.live.data.sub_(step * m.pending).clamp_(-m.bound, m.bound)
                m.pending = None
                self.steered = True
        self._choose_target()
        self._check_limits()

    def _choose_target(self) -> None:
        best_key, best_ratio = None, float("inf")
        for key, p in self.progress.items():
            if key not in self.targets or p.aside_until > self.steps:
                continue
            if self.steps - p.best_at > PATIENCE and key == self.target:
                p.aside_until, p.best_at = self.steps + SET_ASIDE, self.steps
                continue
            ratio = p.best / p.first if p.first > 0 else p.best
            if ratio < best_ratio:
                best_key, best_ratio = key, ratio
        if best_key is not None and best_key != self.target:
            self.target, self.a = best_key, STEP_START

    def _check_limits(self) -> None:
        if self.steps >= self.settings.max_steps:
            self.out_of_steps = True
            self.stop_note = f"stopped after {self.steps} training steps (its budget)"
            raise TrainingStopped()
        if cap_clock() > self.deadline:
            self.timed_out = True
            self.stop_note = f"stopped by the clock after {self.steps} training steps"
            raise TrainingStopped()

    def _state(self, outcome: SiteOutcome) -> TrainingFound:
        """The failing iteration's inputs and weights."""
        inputs = {k: m.live.detach().clone() for k, m in self.inputs.items() if k not in self.initial}
        deltas, weights = {}, {}
        for p, key in self._params.values():
            if key in self.initial and torch.is_floating_point(p):
                # A rebound weight is its first tensor moved to where training took it.
                first = self._rebinding.get(key, key)
                now, then = p.detach(), self.initial[first]
                d = now - then
                # Bit for bit: a weight training took from 0.0 to -0.0 moved too.
                if bool((d.ne(0) | (torch.signbit(now) != torch.signbit(then))).any()):
                    deltas[first] = d.clone()
                    weights[first] = now.clone()
        return TrainingFound(
            outcome, inputs, deltas, weights, dict(self.param_names), self.steps, time.monotonic() - self.t0
        )


def train_search(
    program: Any, sites: list[Site], targets: set[str], settings: TrainingSettings
) -> TrainingReport:
    """One run of ``program`` in GRIST's training mode (see the module docstring)."""
    from .entries import seed_everything, split_arguments

    seed_everything(program.seed)
    cfg = program.tracer_config(sites=sites, record=True, judge_gradients=True)
    tracer = TrainingTracer(cfg, settings, targets)
    t0 = time.monotonic()
    try:
        call, named = program.produce_only(program.prepare)
    except BaseException as e:  # the entry itself failed: the per-site search will say what happened
        return TrainingReport(None, 0, time.monotonic() - t0, f"the program could not start: {e}", e)
    args, kwargs = split_arguments(named)

    def body() -> None:
        with tracer.optimizers_noted():
            call(*args, **kwargs)

    _, error = trace_call(tracer, body)
    seconds = time.monotonic() - t0
    if tracer.found is not None:
        note, error = "training run", None
    else:
        note = tracer.stop_note or (
            f"the program ended after {tracer.steps} training steps"
            if error is None
            else f"the program raised {type(error).__name__} after {tracer.steps} training steps"
        )
    return TrainingReport(
        tracer.found,
        tracer.steps,
        seconds,
        note,
        error,
        set(tracer.reached),
        timed_out=tracer.timed_out,
        steered=tracer.steered,
        out_of_steps=tracer.out_of_steps,
    )
