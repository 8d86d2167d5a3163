"""The GRIST search for one target Site: drive its operand into the invalid region.

Objective: ``KINDS[kind].region.distance(operand)`` at the target's first
evaluation in a run (the run is aborted right there, so an iteration costs only
the work up to the target). Moves, combined because each finds bugs the others
miss:

* the example inputs as recorded (the program may already fail);
* mutations: shape (batch of one, a length-one dimension) for the
  shape-decided kinds, all zeros, identical rows, constants, extremes of the
  domain, integer labels at each class, empty / full boolean masks;
* signed-gradient steps ``x <- clip(x - a*sign(grad))`` with an adaptive ``a``;
* Newton steps ``x <- x - f * grad / |grad|^2`` for regions decided by an exact
  root (division by zero, log(0)), which signed steps only circle around;
* random restarts when the gradient vanishes or the step collapses;
* if the inputs alone do not get there (or stall), parameters move as well
  (bounded): signed steps, steps along the gradient relative to each tensor's
  size, and single-number parameters (temperatures, scales) tried at, across and
  either side of 0.

Each move is a method of ``Search``, whose docstring says when it is tried. A search ends
when it breaks the site, when its budget of runs runs out, or when every move has had its turn
and none has come closer for a long while (``GIVE_UP_AFTER``): the rest of the budget goes to the
file's other sites and entries.

Budgets are runs, not seconds (``budget.runs_for``), so one seed gives one witness on any
machine and under any load; the clock is only a safety cap for programs whose runs are slow,
and a search it stops says so ("stopped by the clock after N runs").

Domain (stated in the witness): every float input stays within
``bound_factor * max(1, max|example|)`` elementwise in absolute value (100x the
example range by default) and on its support (``SUPPORTS``: a sampler's, or what
every real caller of a probed function passed); every parameter within
``max(1, 10*|w|)`` of its value at entry, elementwise. Same seed -> same
sequence -> same witness.
"""

from __future__ import annotations

import math
import os
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from grist_lsp.analyzer.catalogue import KINDS
from grist_lsp.model import FACTORY_KEY, Site

from .budget import RUNS_PER_SECOND, cap_clock, clock_cap, runs_for
from .entries import Program
from .tracing import LOOP_ROUNDS, SiteOutcome, Tracer


@dataclass
class SearchSettings:
    # This site's budget, in seconds of ``--budget``: it buys ``runs_for(budget)`` runs, and the
    # clock stops the search at ``clock_cap(budget)`` CPU seconds whatever the runs.
    budget: float = 5.0
    seed: int = 0
    bound_factor: float = 100.0
    weight_factor: float = 10.0
    # How far a weight may move at least, whatever its magnitude (a zero-initialised one: by 1).
    weight_floor: float = 1.0
    move_weights: bool = True
    # Inputs bounded by the program's own magnitudes exactly (bound_factor 1 still lets an input
    # of magnitude 0.5 reach 1): a witness a maintainer believes, its weights moved instead.
    within_examples: bool = False
    # The safety cap's multiple of ``clock_cap(budget)``: a search whose result must not depend on
    # the machine (one a clock-stopped run would only discard) gets room to finish its runs.
    clock_room: float = 1.0
    # Input key -> a SUPPORTS name the input must stay in (a probe's arguments: what real callers pass).
    supports: dict[str, str] = field(default_factory=dict)
    # Site key -> a run that broke that site on the way to this search's target (every run watches
    # every site): the worker takes it as that site's witness instead of searching it again.
    harvest: dict[str, Found] | None = None


@dataclass
class Evaluation:
    """One run of the program with given inputs."""

    outcome: SiteOutcome | None  # None: the target was not reached
    error: BaseException | None
    d: float  # objective (inf when unusable)
    grads: dict[str, torch.Tensor]  # input or "w:<param key>" -> gradient
    used: list[str]  # input keys in order of use
    params: dict[str, torch.Tensor]  # parameter key -> its value at entry
    param_names: dict[str, str]
    values: dict[str, Any] = field(default_factory=dict)  # the inputs as run (projected on their support)
    weight_inputs: set[str] = field(default_factory=set)  # inputs that only initialise weights (see tracing)

    @property
    def found(self) -> bool:
        return self.outcome is not None and self.outcome.found


@dataclass
class Found:
    outcome: SiteOutcome
    values: dict[str, torch.Tensor]  # every input the failing run used
    deltas: dict[str, torch.Tensor]  # parameter key -> delta added
    param_names: dict[str, str]
    iterations: int
    seconds: float
    how: str  # which move found it
    # Parameter key -> exact value in the failing run (a training run's state; ``deltas`` then
    # only say how far the weights went).
    weights: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def aimed_step(self) -> int:
        """The training step a run of this finding aims at: a training run's state is loaded at
        entry and breaks its site at the first evaluation; a search's moves, at the step it reached."""
        return 0 if self.weights else self.outcome.step

    @property
    def run_deltas(self) -> dict[str, torch.Tensor]:
        """The weight moves a run of this finding adds (none over a training run's exact state)."""
        return {} if self.weights else self.deltas

    @classmethod
    def seen(
        cls,
        other: SiteOutcome,
        tracer: Tracer,
        values: dict[str, Any],
        deltas: dict[str, torch.Tensor],
        weights: dict[str, torch.Tensor],
        iterations: int,
        seconds: float,
        how: str,
    ) -> Found:
        """Site ``other``, broken by a run (``tracer``'s) that was not aimed at it: the inputs that
        run used, its moves and its weights."""
        return cls(
            other,
            {k: values[k] for k in dict.fromkeys(tracer.used_inputs) if k in values},
            {k: d.detach().clone() for k, d in deltas.items()},
            dict(tracer.param_names),
            iterations,
            seconds,
            how,
            weights={k: w.clone() for k, w in weights.items()},
        )


@dataclass
class SearchReport:
    found: Found | None
    iterations: int
    seconds: float
    best_distance: float
    note: str = ""
    # The search gave up before its budget: every move tried, no closer for GIVE_UP_AFTER runs.
    stalled: bool = False


@dataclass
class Runner:
    """Runs ``program`` once per call, aiming at ``site``; counts iterations."""

    program: Program
    site: Site
    sites: list[Site]
    iterations: int = 0
    param_values: dict[str, torch.Tensor] = field(default_factory=dict)
    free_params: set[str] = field(default_factory=set)  # keys of param_values that are free (tracing)
    # Gradients through the user's no_grad blocks; switched off when the program cannot take it
    # (in-place updates of leaves in a no_grad block).
    grad_everywhere: bool = True
    supports: dict[str, str] = field(default_factory=dict)  # see SearchSettings
    harvest: dict[str, Found] | None = None  # see SearchSettings
    started: float = field(default_factory=time.monotonic)
    # (file name, line) -> how many runs the program itself stopped there before the target: a
    # precondition it states (``assert``, ``torch._assert``, a raising guard) is the search's wall.
    walls: dict[tuple[str, int], int] = field(default_factory=dict)
    # The training step whose evaluation of the site is aimed at (``Witness.target_step``).
    target_step: int = 0
    # Runs that reached the site, and those of them whose operand gave a distance: an operand that
    # never does (a size, a Python number) is beyond anything the search moves (``Search.stalled``).
    reached: int = 0
    measured: int = 0

    def evaluate(
        self,
        values: dict[str, Any],
        deltas: dict[str, torch.Tensor] | None = None,
        grad: bool = True,
        weights: dict[str, torch.Tensor] | None = None,
    ) -> Evaluation:
        self.iterations += 1
        values = project(values, self.supports)
        leaves: dict[str, Any] = {}
        for k, v in values.items():
            if isinstance(v, torch.Tensor) and grad and torch.is_floating_point(v):
                leaves[k] = v.detach().clone().requires_grad_(True)
            else:
                leaves[k] = v.detach().clone() if isinstance(v, torch.Tensor) else v
        wleaves = {k: d.detach().clone().requires_grad_(grad) for k, d in (deltas or {}).items()}
        cfg = self.program.tracer_config(
            sites=self.sites,
            target=self.site,
            subs=leaves,
            weight_subs=wleaves,
            weight_values={k: w.clone() for k, w in (weights or {}).items()},
            target_step=self.target_step,
            stop_after_rounds=LOOP_ROUNDS,
        )
        tracer, outcome, error = self.program.run(cfg, grad_everywhere=grad and self.grad_everywhere)
        params = {
            key: p.detach().clone() for p, key in tracer._params.values() if key not in self.param_values
        }
        self.param_values.update(params)
        self.free_params |= tracer.free_params()
        if outcome is None and error is not None:
            wall = _raised_at(error, self.program.user_files)
            if wall is not None:
                self.walls[wall] = self.walls.get(wall, 0) + 1
        if self.harvest is not None:
            for key, other in tracer.reached.items():
                if other.found and key != self.site.key and key not in self.harvest:
                    self.harvest[key] = Found.seen(
                        other,
                        tracer,
                        values,
                        deltas or {},
                        weights or {},
                        self.iterations,
                        time.monotonic() - self.started,
                        "seen while searching another site",
                    )
        d = float("inf")
        grads: dict[str, torch.Tensor] = {}
        if outcome is not None:
            self.reached += 1
            self.measured += outcome.distance is not None
        if outcome is not None and outcome.distance is not None:
            dist = outcome.distance
            d = float(dist.detach())
            if d != d:
                d = float("inf")
            wanted = [(k, t) for k, t in leaves.items() if isinstance(t, torch.Tensor) and t.requires_grad]
            wanted += [("w:" + k, t) for k, t in wleaves.items()]
            if grad and dist.requires_grad and wanted:
                try:
                    gs = torch.autograd.grad(dist, [t for _, t in wanted], allow_unused=True)
                    grads = {
                        k: g
                        for (k, _), g in zip(wanted, gs)
                        if g is not None and bool(torch.isfinite(g).all())
                    }
                except RuntimeError:
                    grads = {}
        return Evaluation(
            outcome,
            error,
            d,
            grads,
            list(dict.fromkeys(tracer.used_inputs)),
            params,
            dict(tracer.param_names),
            values,
            set(tracer.weight_inputs),
        )


# Where an input may live. Values are moved back onto their support before every run, so
# that gradient steps and mutations never leave it: a witness must use inputs the program
# could really receive.
SUPPORTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "non-negative": lambda v: v.clamp_min(0),
    "whole numbers": lambda v: v.round(),
    "non-negative whole numbers": lambda v: v.round().clamp_min(0),
    "0 or 1": lambda v: v.round().clamp(0, 1),
}

# A sampler's draws stay in its support: a Poisson count is a non-negative integer, a
# Bernoulli draw is 0 or 1. Keys of factory inputs name the factory (see tracing).
FACTORY_SUPPORT = {
    "torch.poisson": "non-negative whole numbers",
    "torch.bernoulli": "0 or 1",
}


def support_of(key: str, supports: dict[str, str]) -> str | None:
    """The support of input ``key``: given (what every real caller passed), else its sampler's."""
    if key in supports:
        return supports[key]
    m = FACTORY_KEY.fullmatch(key)
    return FACTORY_SUPPORT.get(m.group(3)) if m else None


def project(values: dict[str, Any], supports: dict[str, str] | None = None) -> dict[str, Any]:
    """Values moved back onto their input's support (see ``support_of``)."""
    out = values
    for k, v in values.items():
        if not isinstance(v, torch.Tensor) or not torch.is_floating_point(v):
            continue
        name = support_of(k, supports or {})
        if name is not None:
            if out is values:
                out = dict(values)
            out[k] = SUPPORTS[name](v.detach())
    return out


def _bounds(examples: dict[str, Any], factor: float, floor: float = 1.0) -> dict[str, float]:
    """Each float input's bound: ``factor`` times its magnitude, at least ``floor`` (room for an
    input the program gave as zeros)."""
    out = {}
    for k, v in examples.items():
        if isinstance(v, torch.Tensor) and torch.is_floating_point(v) and v.numel():
            out[k] = factor * max(floor, float(v.detach().abs().max()))
    return out


def _leading(examples: dict[str, Any]) -> int | None:
    sizes = [v.shape[0] for v in examples.values() if isinstance(v, torch.Tensor) and v.dim() >= 1]
    if not sizes:
        return None
    return max(set(sizes), key=sizes.count)


def _leading_sizes(examples: dict[str, Any]) -> list[int]:
    """Distinct leading sizes above 1, the most common first."""
    sizes = [
        v.shape[0]
        for v in examples.values()
        if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] > 1
    ]
    return sorted(set(sizes), key=lambda n: (-sizes.count(n), n))


def places(keys: list[str]) -> dict[str, list[str]]:
    """Input keys grouped by the place that made them, each group named by its first key: the
    tensors one line makes anew in each iteration of a loop (``file.py:12:torch.randint#0``,
    ``#1``, ...) are one variable of the program, so a mutation that sets a label or zeros a
    feature sets it in every occurrence at once, one run for the place and not one per iteration
    (a loop of 64 iterations over 5 classes would otherwise be 320 runs of the same idea)."""
    grouped: dict[str, list[str]] = {}
    for k in keys:
        m = FACTORY_KEY.fullmatch(k)
        grouped.setdefault(f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else k, []).append(k)
    return {same[0]: same for same in grouped.values()}


def _with(
    examples: dict[str, Any], keys: list[str], make: Callable[[torch.Tensor], torch.Tensor]
) -> dict[str, Any]:
    """The examples with each of ``keys`` replaced by ``make`` of its value."""
    return {**examples, **{k: make(examples[k]) for k in keys}}


def mutations(
    examples: dict[str, Any], kind: str, bounds: dict[str, float]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Named variants of the example inputs that real data produce, most telling first for the kind."""
    floats = [k for k, v in examples.items() if isinstance(v, torch.Tensor) and torch.is_floating_point(v)]
    ints = [
        k
        for k, v in examples.items()
        if isinstance(v, torch.Tensor) and v.dtype in (torch.int64, torch.int32)
    ]
    bools = [k for k, v in examples.items() if isinstance(v, torch.Tensor) and v.dtype == torch.bool]
    shape_kind = KINDS[kind].region.shape is not None
    if shape_kind:
        yield from _shape_mutations(examples, kind, floats)
    if floats:
        yield from _value_mutations(examples, floats, bounds)
    for k, same in places(ints).items():
        top = max(int(examples[j].max()) if examples[j].numel() else 0 for j in same)
        for c in range(0, min(top + 1, 16)):
            yield f"{LABEL_MUTATION}{k} all {c}", _with(examples, same, lambda v, c=c: torch.full_like(v, c))
    for k, same in places(bools).items():
        yield f"{k} all False", _with(examples, same, torch.zeros_like)
        yield f"{k} all True", _with(examples, same, torch.ones_like)
    if not shape_kind:
        yield from _shape_mutations(examples, kind, floats)


def _shape_mutations(
    examples: dict[str, Any], kind: str, floats: list[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A batch or a length of one is what real data produce (the last batch of an epoch, one
    example at inference); a batch of zero rows is not, so "empty" is left to masks."""
    if KINDS[kind].region.shape == "empty":
        return
    n = _leading(examples)
    for size in _leading_sizes(examples):
        # Every distinct batch size: the data set's rows and a sampled index vector differ.
        how = "batch of 1" if size == n else f"batch of 1 (inputs with {size} rows)"
        yield how, _first_rows(examples, size)
    if any(examples[k].numel() > 1 for k in floats):
        # A reduction over the whole tensor (``adv.std()``) sees one element only when every
        # dimension has length one.
        yield (
            "a single element",
            {
                k: (
                    v[(slice(0, 1),) * v.dim()].clone() if isinstance(v, torch.Tensor) and v.dim() >= 1 else v
                )
                for k, v in examples.items()
            },
        )
    for k in places(floats):
        yield from _length_one_dimensions(examples, k, n)


def _first_rows(examples: dict[str, Any], size: int) -> dict[str, Any]:
    """The examples with a leading dimension of ``size`` cut to their first row."""
    return {
        k: (v[:1] if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == size else v)
        for k, v in examples.items()
    }


def _length_one_dimensions(
    examples: dict[str, Any], k: str, n: int | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Input ``k`` with one dimension past the batch, then every dimension past the channels,
    of length one (with and without a batch of one)."""
    v = examples[k]
    for dim in range(1, v.dim()):
        if v.shape[dim] > 1:
            yield f"{k} with dimension {dim} of length 1", {**examples, k: v.narrow(dim, 0, 1).clone()}
    if v.dim() >= 3 and any(x > 1 for x in v.shape[2:]):
        # Feature maps pooled to 1x1, sequences of length one: every dimension past the channels.
        spatial = v[(slice(None), slice(None)) + (slice(0, 1),) * (v.dim() - 2)].clone()
        yield f"{k} with dimensions 2.. of length 1", {**examples, k: spatial}
        if n is not None and n > 1 and v.shape[0] == n:
            yield (
                f"batch of 1 and {k} with dimensions 2.. of length 1",
                {**_first_rows(examples, n), k: spatial[:1].clone()},
            )


def _value_mutations(
    examples: dict[str, Any], floats: list[str], bounds: dict[str, float]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The float inputs set to values real data hold: zeros, repeated rows, constants, and the
    domain's extremes (which ``Search`` keeps for after the gradient: ``LATE_MUTATIONS``)."""

    def every_float(make: Callable[[torch.Tensor, float], torch.Tensor]) -> dict[str, Any]:
        return {**examples, **{k: make(examples[k], bounds.get(k, 1.0)) for k in floats}}

    yield "all zeros", every_float(lambda v, _: torch.zeros_like(v))
    yield "identical rows", every_float(lambda v, _: v[:1].expand_as(v).clone() if v.dim() >= 1 else v)
    # A padding row, an empty sample: its sum, norm or count is exactly 0.
    yield "a row of zeros", every_float(lambda v, _: _first_row_zero(v))
    # A feature that never varies: its std, range or variance over the rows is exactly 0.
    yield "a constant column", every_float(lambda v, _: _first_column_constant(v))
    grouped = places(floats)
    if len(grouped) > 1:
        for k, same in grouped.items():
            yield f"{k} all zeros", _with(examples, same, torch.zeros_like)
    yield "all ones", every_float(lambda v, _: torch.ones_like(v))
    yield "all -1", every_float(lambda v, _: -torch.ones_like(v))
    yield "largest values", every_float(lambda v, bound: torch.full_like(v, bound))
    yield "most negative values", every_float(lambda v, bound: torch.full_like(v, -bound))
    yield "one large value per row", every_float(_one_hot_large)


def _partial_mutations(
    how: str, values: dict[str, Any], examples: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``values`` (a mutation of ``examples``) applied to part of each row (the last dimension)
    of every tensor it changed, the examples' own values elsewhere."""
    changed = [
        k
        for k, v in values.items()
        if isinstance(v, torch.Tensor)
        and isinstance(examples.get(k), torch.Tensor)
        and v.shape == examples[k].shape
        and v.dim() >= 1
        and v.shape[-1] > 1
        and not torch.equal(v, examples[k])
    ]
    if not changed:
        return
    for part, cut in (
        ("the first half of each row", "half"),
        ("all but the first element of each row", "tail"),
    ):
        out = dict(values)
        for k in changed:
            mixed = examples[k].clone()
            n = values[k].shape[-1]
            sl = slice(0, n // 2) if cut == "half" else slice(1, n)
            mixed[..., sl] = values[k][..., sl]
            out[k] = mixed
        yield f"{how}, on {part}", out


MAX_TARGET_STEP = 16  # training steps a search lets the program take before its target's evaluation
LATE_AFTER = 30  # gradient iterations before the domain's extremes are tried
WEIGHTS_AFTER = 60  # iterations on the inputs alone before parameters move too
STALL_AFTER = 12  # iterations without progress after which parameters move anyway
# A search that has tried every move and got no closer in this many runs, and in as many runs as
# it took to reach its best, gives up before its budget. Over the engine corpus and the training
# bench (budget 5, 2026-12-04) every site found was found within 59 runs of the search's latest
# new best (most within 20); a site no input reaches (a norm bounded away from 0 by the weights'
# bounds) would otherwise cost the whole budget, which on a program of 500x784 batches is seconds.
GIVE_UP_AFTER = 100
# A search whose site was reached this many times without its operand ever giving a distance
# (a size, a Python number: nothing a run moves) gives up once every move has had its turn.
UNMEASURED_AFTER = 8
LATE_MUTATIONS = frozenset(
    {
        "largest values",
        "most negative values",
        "one large value per row",
        "a row of zeros",
        "a constant column",
    }
)
# Integer inputs (labels, indices) set to each class: one run per class, and gradient steps
# cannot move them, so they wait with the extremes until the gradient has had its turn or
# has none to give.
LABEL_MUTATION = "integer input: "


def _first_row_zero(v: torch.Tensor) -> torch.Tensor:
    if v.dim() < 2 or v.shape[0] < 2:
        return v
    out = v.clone()
    out[0] = 0
    return out


def _first_column_constant(v: torch.Tensor) -> torch.Tensor:
    if v.dim() < 2 or v.shape[0] < 2:
        return v
    out = v.clone()
    out[:, 0] = v[0, 0]
    return out


def _one_hot_large(v: torch.Tensor, bound: float) -> torch.Tensor:
    out = torch.zeros_like(v)
    if v.dim() == 0:
        return out.fill_(bound)
    out.select(-1, 0).fill_(bound)
    return out


def _newton_applies(kind: str) -> bool:
    return KINDS[kind].region.exact_root


def search(
    program: Program,
    site: Site,
    sites: list[Site],
    examples: dict[str, Any],
    settings: SearchSettings,
    deadline: float | None = None,
) -> SearchReport:
    """Look for inputs (and parameter moves) that make ``site`` produce NaN/INF from finite operands."""
    return Search(program, site, sites, examples, settings, deadline).run()


class Search:
    """One search for one site: its state as fields, one method per move (see the module docstring).

    Before the loop, once each: ``try_examples`` (the inputs as recorded) and ``try_mutations``
    (the early mutations; the domain's extremes and the integer labels are kept for later).
    Then, one move per iteration, the first that applies:

    * ``start_moving_weights``: parameters join the search (weight mutations first);
    * ``try_late_mutation``: the next of the kept mutations;
    * ``land``: the landing moves for an operand a hair's breadth from the region;
    * ``coast``: keep going the last way when the gradient underflowed on a plateau;
    * ``restart``: a random restart when the gradient vanished or the step collapsed;
    * ``step``: a Newton step and a signed-gradient step (and, with weights, a step along the
      gradient relative to each weight's size), the better one kept.

    Every move returns the report when it broke the site, else None. The loop stops at the clock
    or when the search has ``stalled`` (no closer for long, every move tried); a search stopped
    inside it is ``resumable``: ``resume`` goes on from its state for more seconds (a stalled one
    gives up again at once).
    """

    def __init__(
        self,
        program: Program,
        site: Site,
        sites: list[Site],
        examples: dict[str, Any],
        settings: SearchSettings,
        deadline: float | None,
    ) -> None:
        self.site = site
        self.settings = settings
        self.t0 = time.monotonic()  # when the current stretch of searching began
        self.spent_before = 0.0  # seconds searched in earlier stretches (``resume``)
        self.paused_at: float | None = None
        self.resumable = False  # in the gradient loop: ``resume`` goes on from here
        clock_end = cap_clock() + clock_cap(settings.budget) * settings.clock_room
        self.end = clock_end if deadline is None else min(deadline, clock_end)  # the safety cap
        self.run_end = runs_for(settings.budget)  # the budget: the run count this stretch stops at
        self.clock_stopped = False  # the clock, not the run budget, ended the latest stretch
        self.runner = Runner(program, site, sites, supports=settings.supports, harvest=settings.harvest)
        # Shares the runner's set: a free parameter is known once a run has met it.
        self.limits = WeightLimits(
            settings.weight_factor, settings.bound_factor, self.runner.free_params, settings.weight_floor
        )
        seed = (settings.seed * 1000003 + zlib.crc32(site.key.encode())) % (2**63)
        self.gen = torch.Generator().manual_seed(seed)
        self.examples = examples
        self.bounds = self._input_bounds(examples)
        self.best = float("inf")  # the smallest objective seen
        # Why the first run whose operand reached the region (objective <= 0) broke nothing.
        self.touched: str | None = None
        # The point the gradient moves from: the examples, or the mutation closest to the region.
        self.start: dict[str, Any] = examples
        self.start_ev = _unreached()
        self.late: list[tuple[str, dict[str, Any]]] = []  # mutations kept for after the gradient
        self.partials: set[str] = set()  # the mutations ``_shadowed`` made of part of each row
        self.cur: dict[str, Any] = {}
        self.cur_ev = _unreached()
        self.deltas: dict[str, torch.Tensor] = {}  # parameter key -> delta (when weights move)
        self.weights_on = False
        self.step_size = 0.05  # of the signed steps, relative to each input's bound
        self.newton_ok = _newton_applies(site.kind)
        # aim_later applies (a value objective: shapes do not change with training)
        self.program_trains = program.trains and KINDS[site.kind].region.shape is None
        self.momentum: dict[str, torch.Tensor] = {}  # the last successful signed step
        self.coasting = 0  # steps taken along the momentum since the gradient vanished
        self.tiny_at = TINY  # an objective below this tries the landing moves (then 1000x closer)
        # Phases switch by iteration count, not by the clock, so that the same seed gives the
        # same witness on a busy machine; the budget only decides when to give up.
        self.late_at = 0
        self.weights_at = 0
        self.stalled_at = 0
        self.progress = float("inf")
        self.improved_at = 0  # the run that gave the latest new best (once the gradient phase began)

    def _input_bounds(self, examples: dict[str, Any]) -> dict[str, float]:
        return _bounds(
            examples, self.settings.bound_factor, floor=0.0 if self.settings.within_examples else 1.0
        )

    def run(self) -> SearchReport:
        report = self.try_examples()
        if report is not None:
            return report
        report = self.try_mutations()
        if report is not None:
            return report
        self._begin_gradient_phase()
        return self._loop()

    def resume(self, seconds: float) -> SearchReport:
        """Go on for a budget of ``seconds`` more (in runs, ``runs_for``) from where the gradient
        loop stopped (``resumable``): a site searched in several slices (between training runs)
        adds them up as one search would."""
        self.spent_before, self.paused_at = self.seconds(), None
        self.t0 = time.monotonic()
        self.end = cap_clock() + clock_cap(seconds)
        self.run_end = self.runner.iterations + runs_for(seconds)
        return self._loop()

    def out_of_budget(self) -> bool:
        """Whether this stretch has used its runs, or (the safety cap) its time."""
        if self.runner.iterations >= self.run_end:
            return True
        if cap_clock() >= self.end:
            self.clock_stopped = True
            return True
        return False

    def seconds(self) -> float:
        """Seconds spent searching, over every stretch."""
        until = self.paused_at if self.paused_at is not None else time.monotonic()
        return self.spent_before + until - self.t0

    def held(self) -> int:
        """Tensor elements a paused search keeps for ``resume`` (inputs, parameter moves, gradients)."""
        kept: list[Any] = [*self.cur.values(), *self.start.values(), *self.deltas.values()]
        kept += [*self.momentum.values(), *self.cur_ev.grads.values(), *self.start_ev.grads.values()]
        kept += [v for _, values in self.late for v in values.values()]
        return sum(t.numel() for t in kept if isinstance(t, torch.Tensor))

    def _loop(self) -> SearchReport:
        self.resumable = False  # until the loop stops, with its state intact
        self.clock_stopped = False
        while not self.out_of_budget():
            self._note_progress()
            if self.stalled():
                break
            report = self._next_move()()
            if report is not None:
                return report
        report = self.give_up()
        # A stalled search stays resumable: resuming it gives up at once (nothing new to try).
        self.paused_at, self.resumable = time.monotonic(), True
        return report

    def stalled(self) -> bool:
        """Every move has had its turn (parameters moving, kept mutations tried) and the best
        distance has not improved for ``GIVE_UP_AFTER`` runs, nor for as many runs as it took
        to reach it. Counted in runs, like the phases, so a seed gives the same answer on any
        machine."""
        if self.late or (not self.weights_on and self.settings.move_weights and self.runner.param_values):
            return False
        if self.unmeasurable():
            return True
        since = self.runner.iterations - self.improved_at
        return since >= max(GIVE_UP_AFTER, self.improved_at)

    def unmeasurable(self) -> bool:
        """The site was reached ``UNMEASURED_AFTER`` times and its operand never gave a distance
        (``x.sum() / x.size(0)``: a size, no tensor): past the mutations (shapes, zeros, extremes)
        and the weights' first moves, no further run can change that."""
        return self.runner.measured == 0 and self.runner.reached >= UNMEASURED_AFTER

    def _next_move(self) -> Callable[[], SearchReport | None]:
        ev = self.cur_ev
        if self._gradient_waits_for_training(ev):
            return self.aim_later
        if (
            not self.weights_on
            and self.settings.move_weights
            and self.runner.param_values
            and self.runner.iterations >= min(self.weights_at, self.stalled_at)
        ):
            return self.start_moving_weights
        if self.late and (not ev.grads or ev.d == float("inf") or self.runner.iterations >= self.late_at):
            return self.try_late_mutation
        if 0 < ev.d < self.tiny_at:
            return self.land
        if not ev.grads and self.momentum and ev.d != float("inf") and self.coasting < 4:
            return self.coast
        if not ev.grads or ev.d == float("inf"):
            return self.restart
        return self.step

    def _run_deltas(self, deltas: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        """The deltas a run adds: none until the parameters move."""
        return deltas if self.weights_on else None

    def _witness_deltas(self, deltas: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The deltas a witness states: none until the parameters move."""
        return deltas if self.weights_on else {}

    def done(
        self, ev: Evaluation, values: dict[str, Any], deltas: dict[str, torch.Tensor], how: str
    ) -> SearchReport:
        """The report for run ``ev``, which broke the site."""
        assert ev.outcome is not None, "done() is called only for a run that reached the site"
        values = {k: v for k, v in (ev.values or values).items() if k not in ev.weight_inputs}
        used = {k: values[k] for k in ev.used if k in values} or dict(values)
        found = Found(
            ev.outcome,
            used,
            {k: d.detach().clone() for k, d in deltas.items()},
            ev.param_names,
            self.runner.iterations,
            self.seconds(),
            how,
        )
        return SearchReport(found, self.runner.iterations, self.seconds(), 0.0)

    def try_examples(self) -> SearchReport | None:
        """The example inputs as recorded; also a report when they do not reach the site."""
        runner = self.runner
        ev = runner.evaluate(self.examples)
        if ev.outcome is None and ev.error is not None:
            runner.grad_everywhere = False
            ev = runner.evaluate(self.examples)
        if ev.weight_inputs:
            # Values that only initialise trainable tensors stay as the program drew them: the
            # weights they made are moved as weights (bounded as weights are), not as inputs.
            self.examples = {k: v for k, v in self.examples.items() if k not in ev.weight_inputs}
            self.bounds = self._input_bounds(self.examples)
        if ev.found:
            return self.done(ev, self.examples, {}, "example inputs")
        if ev.outcome is None:
            # Not reached with the examples: nothing to steer from.
            why = f"not reached ({type(ev.error).__name__}: {ev.error})" if ev.error else "not reached"
            return SearchReport(None, runner.iterations, self.seconds(), self.best, why)
        self._saw(ev)
        self.start, self.start_ev = self.examples, ev
        return None

    def try_mutations(self) -> SearchReport | None:
        """The early mutations; the start moves to the one closest to the region."""
        for how, values in mutations(self.examples, self.site.kind, self.bounds):
            values = self._kept(values)
            if self.out_of_budget():
                break
            if how in LATE_MUTATIONS or how.startswith(LABEL_MUTATION):
                # The domain's extremes make less believable witnesses: gradient steps go first.
                self.late.append((how, values))
                continue
            mev = self.runner.evaluate(values)
            if mev.found:
                return self.done(mev, values, {}, f"mutation: {how}")
            self._shadowed(how, values, mev)
            if mev.outcome is not None and mev.d < self.start_ev.d and mev.grads:
                self.start, self.start_ev = values, mev
            self._saw(mev)
        return None

    def _kept(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` within the inputs' bounds, for a search that must keep them within the
        program's own range (a mutation's "all ones" is past a ``torch.rand`` input's 0.9998)."""
        if not self.settings.within_examples:
            return values
        return {
            k: _clip(v, self.bounds[k]) if k in self.bounds and isinstance(v, torch.Tensor) else v
            for k, v in values.items()
        }

    def _begin_gradient_phase(self) -> None:
        iterations = self.runner.iterations
        self.cur, self.cur_ev = dict(self.start), self.start_ev
        self.late_at = iterations + LATE_AFTER
        self.weights_at = iterations + WEIGHTS_AFTER
        if not self.start_ev.grads:
            # The inputs do not reach the operand at all (it depends on parameters only).
            self.weights_at = iterations
        # The inputs alone make no headway (a cosine of a vector with itself, an operand the inputs
        # barely touch): the parameters move sooner than WEIGHTS_AFTER.
        self.stalled_at, self.progress = iterations + STALL_AFTER, self.best
        self.improved_at = iterations

    def _note_progress(self) -> None:
        if self.best < self.progress * (1 - 1e-6):
            self.stalled_at, self.progress = self.runner.iterations + STALL_AFTER, self.best
            self.improved_at = self.runner.iterations

    def start_moving_weights(self) -> SearchReport | None:
        """Parameters join the search from the start point; single-number ones are mutated first."""
        runner = self.runner
        self.weights_on = True
        # Moved weights give the objective a gradient at the site's first evaluation, zero weights
        # included: aim there again (``aim_later`` went further in only for want of one).
        runner.target_step = 0
        self.deltas = {
            k: torch.zeros_like(p) for k, p in runner.param_values.items() if torch.is_floating_point(p)
        }
        self.cur, self.cur_ev = dict(self.start), runner.evaluate(self.start, self.deltas)
        if self.cur_ev.found:
            return self.done(self.cur_ev, self.cur, self.deltas, "gradient with weights")
        for how, cand_d in _weight_mutations(
            self.deltas, runner.param_values, self.cur_ev.param_names, self.limits
        ):
            if self.out_of_budget():
                break
            mev = runner.evaluate(self.cur, cand_d)
            if mev.found:
                return self.done(mev, self.cur, cand_d, f"weight mutation: {how}")
            self._saw(mev)
            if mev.outcome is not None and mev.grads and mev.d < self.cur_ev.d:
                self.cur_ev, self.deltas = mev, cand_d
        self.step_size = 0.05
        return None

    def _shadowed(self, how: str, values: dict[str, Any], ev: Evaluation) -> None:
        """A mutation that broke a site upstream of the target first (every element of a row
        masked makes its ``log_softmax`` NaN, before the target's ``exp(logp) * logp``) hides
        whether it breaks the target too: it is tried next on part of each row only, which may
        keep the upstream site valid (a row partly masked). A part is never split again: each
        split that broke upstream too would put two more in front of the other mutations, and a
        search whose upstream site breaks easily (a random mask) spent its budget on them."""
        if ev.outcome is None or ev.outcome.result != "upstream" or how in self.partials:
            return
        parts = list(_partial_mutations(how, values, self.examples))
        self.partials.update(h for h, _ in parts)
        self.late[:0] = parts

    def try_late_mutation(self) -> SearchReport | None:
        """The next mutation kept for later (the domain's extremes, integer labels)."""
        how, values = self.late.pop(0)
        lev = self.runner.evaluate(values, self._run_deltas(self.deltas))
        if lev.found:
            return self.done(lev, values, self._witness_deltas(self.deltas), f"mutation: {how}")
        self._shadowed(how, values, lev)
        if lev.outcome is not None and lev.grads and lev.d < self.cur_ev.d:
            self.cur, self.cur_ev = values, lev
        return None

    def land(self) -> SearchReport | None:
        """A float32 operand stalls "one step short" of the region (log of 1.4e-45, a divisor of
        1e-12): the gradient underflows or each step overshoots the root. Try moves that land."""
        self.tiny_at = self.cur_ev.d * 1e-3
        for how, cand, cand_d in _landing_moves(
            self.cur,
            self.deltas,
            self.cur_ev,
            self.bounds,
            self.runner.param_values,
            self.limits,
        ):
            tev = self.runner.evaluate(cand, self._run_deltas(cand_d))
            if tev.found:
                return self.done(tev, cand, self._witness_deltas(cand_d), how)
            if tev.outcome is not None and tev.d < self.cur_ev.d:
                self.cur, self.cur_ev = cand, tev
                self.deltas = cand_d if self.weights_on else self.deltas
        return None

    def coast(self) -> SearchReport | None:
        """The gradient underflowed on a plateau (softmax at 1e-45): keep going the last way,
        twice as far each time."""
        self.coasting += 1
        step = {k: m * (2.0**self.coasting) for k, m in self.momentum.items()}
        cand = {k: (_clip(v + step[k], self.bounds[k]) if k in step else v) for k, v in self.cur.items()}
        mev = self.runner.evaluate(cand, self._run_deltas(self.deltas))
        if mev.found:
            return self.done(mev, cand, self._witness_deltas(self.deltas), "gradient step (coasting)")
        if mev.outcome is not None and mev.d <= self.cur_ev.d:
            self.cur, self.cur_ev = cand, mev
        return None

    def _gradient_waits_for_training(self, ev: Evaluation) -> bool:
        """The program trains, some of its weights are all zero, the site was reached, and the
        objective's gradient is exactly 0 everywhere: weights initialised to zero (a uniform
        softmax has no input gradient), which the program's own training moves. An objective
        that is a shape (one element, an empty selection) has no gradient at any step."""
        return (
            self.program_trains
            and self.runner.target_step < MAX_TARGET_STEP
            and ev.outcome is not None
            and ev.d != float("inf")
            and bool(ev.grads)
            and not any(bool(g.any()) for g in ev.grads.values())
            and any(
                torch.is_floating_point(p) and p.numel() > 1 and not bool(p.any())
                for p in self.runner.param_values.values()
            )
        )

    def aim_later(self) -> SearchReport | None:
        """Aim at the site's evaluation some training steps in (1, then twice as many): the
        program's own optimizer moves the weights off zero, and one step later the gradient
        flows. That state is as reachable as the first; the witness says which step it is."""
        before = self.runner.target_step
        self.runner.target_step = max(1, 2 * before)
        ev = self.runner.evaluate(self.cur, self._run_deltas(self.deltas))
        if ev.outcome is None:
            # The program ends (or raises) before that step: stay with the last one it reaches.
            self.runner.target_step, self.program_trains = before, False
            return None
        self.cur_ev = ev
        if ev.found:
            return self.done(ev, self.cur, self.deltas, f"the state after {ev.outcome.step} training steps")
        return None

    def restart(self) -> SearchReport | None:
        """Random inputs around the examples (and the weights back at entry)."""
        self.momentum, self.coasting = {}, 0
        scale = float(torch.rand((), generator=self.gen)) * 4 + 0.5
        self.cur = {
            k: (
                _clip(
                    v + self._noise(v) * scale * self.bounds[k] / self.settings.bound_factor, self.bounds[k]
                )
            )
            if k in self.bounds
            else v
            for k, v in self.examples.items()
        }
        if self.weights_on:
            self.deltas = {k: self._restart_delta(k, d, scale) for k, d in self.deltas.items()}
        self.cur_ev = self.runner.evaluate(self.cur, self._run_deltas(self.deltas))
        if self.cur_ev.found:
            return self.done(self.cur_ev, self.cur, self.deltas, "random restart")
        self.step_size = 0.05
        return None

    def _restart_delta(self, key: str, d: torch.Tensor, scale: float) -> torch.Tensor:
        """A weight's delta at a restart: back at entry, except a zero-initialised tensor, which
        goes to a random point near zero within its bound. Under zero init every unit of a layer
        is the same and a ReLU at 0 passes no gradient back, so no gradient step ever moves those
        weights apart (a ReLU network with ``nn.init.zeros_``); a random start breaks the symmetry
        as a random init would, and the witness says how far the weights went."""
        p = self.runner.param_values.get(key)
        if p is None or p.numel() < 2 or not torch.is_floating_point(p) or bool(p.any()):
            return torch.zeros_like(d)
        noise = self._noise(d) * scale * RESTART_WEIGHT_SCALE
        return self.limits.clip(key, noise, p)

    def _noise(self, v: torch.Tensor) -> torch.Tensor:
        return torch.randn(v.shape, generator=self.gen, dtype=v.dtype)

    def step(self) -> SearchReport | None:
        """Both moves each iteration, keep the better: Newton lands exactly on roots that signed
        steps circle around, signed steps cross exponential plateaus that Newton crawls along."""
        newton: _Candidate | None = None
        if self.newton_ok and self.cur_ev.d > 0:
            tried = self.newton_step()
            if isinstance(tried, SearchReport):
                return tried
            newton = tried
        signed = self.signed_step()
        if isinstance(signed, SearchReport):
            return signed
        if self.weights_on and self.deltas:
            relative = self.relative_step(signed.values)
            if isinstance(relative, SearchReport):
                return relative
            if (
                relative.ev.outcome is not None
                and relative.ev.grads
                and (signed.ev.outcome is None or relative.ev.d < signed.ev.d)
            ):
                signed = _Candidate(signed.values, relative.deltas, relative.ev)
        self._keep_better(newton, signed)
        return None

    def newton_step(self) -> _Candidate | SearchReport:
        """Newton's step on the objective: lands on the roots of exact-root regions."""
        values, deltas = _newton(
            self.cur,
            self.deltas,
            self.cur_ev,
            self.bounds,
            self.runner.param_values,
            self.limits,
        )
        return self._evaluate_step(values, deltas, "Newton step")

    def signed_step(self) -> _Candidate | SearchReport:
        """A signed-gradient step of the current step size."""
        values, deltas = _signed(
            self.cur,
            self.deltas,
            self.cur_ev,
            self.bounds,
            self.step_size,
            self.runner.param_values,
            self.limits,
        )
        return self._evaluate_step(values, deltas, "gradient step")

    def _evaluate_step(
        self, values: dict[str, Any], deltas: dict[str, Any], how: str
    ) -> _Candidate | SearchReport:
        """Run a step's point: the witness if it breaks the site, else a candidate to compare."""
        ev = self.runner.evaluate(values, self._run_deltas(deltas))
        if ev.found:
            return self.done(ev, values, self._witness_deltas(deltas), how)
        self._saw(ev)
        return _Candidate(values, deltas, ev)

    def relative_step(self, values: dict[str, Any]) -> _Candidate | SearchReport:
        """Signed steps move every weight at once; a step along the gradient, scaled to each
        tensor's size, moves the few that matter (a temperature, a scale) without wrecking the
        rest of the network. Each finds bugs the other misses: the caller keeps the better."""
        deltas = _relative(self.deltas, self.cur_ev, self.step_size, self.runner.param_values, self.limits)
        ev = self.runner.evaluate(values, deltas)
        if ev.found:
            return self.done(ev, values, deltas, "gradient step (weights along the gradient)")
        self._saw(ev)
        return _Candidate(values, deltas, ev)

    def _keep_better(self, newton: _Candidate | None, signed: _Candidate) -> None:
        """Move to the better step; the step size grows after a signed success, shrinks after a
        failure, and collapses into a restart."""
        sev, nev = signed.ev, newton.ev if newton is not None else None
        signed_better = sev.outcome is not None and sev.d < self.cur_ev.d
        newton_better = (
            nev is not None and nev.outcome is not None and nev.d < self.cur_ev.d and bool(nev.grads)
        )
        if newton is not None and newton_better and (not signed_better or newton.ev.d <= sev.d):
            self.cur, self.cur_ev = newton.values, newton.ev
            self.deltas = newton.deltas if self.weights_on else self.deltas
        elif signed_better:
            cand, cur = signed.values, self.cur
            self.momentum = {
                k: cand[k] - cur[k]
                for k in self.bounds
                if k in cand
                and k in cur
                and isinstance(cand[k], torch.Tensor)
                and cand[k].shape == cur[k].shape
            }
            self.coasting = 0
            self.cur, self.cur_ev = cand, sev
            self.deltas = signed.deltas if self.weights_on else self.deltas
            self.step_size = min(self.step_size * 2.0, 1.0)
        else:
            self.step_size *= 0.5
            if self.step_size < 1e-7:
                self.cur_ev = _unreached()  # forces a restart
        self.newton_ok = _newton_applies(self.site.kind) and (
            newton_better or not signed_better or nev is None
        )

    def _saw(self, ev: Evaluation) -> None:
        """Keep the smallest objective; a run that reached the region yet broke nothing says why."""
        self.best = min(self.best, ev.d)
        if ev.d <= 0 and self.touched is None and ev.outcome is not None:
            self.touched = _why_unbroken(ev.outcome, self.runner.iterations)

    def give_up(self) -> SearchReport:
        """The report of a search that ran out of budget: how close it came, and the wall it hit."""
        runner = self.runner
        region = KINDS[self.site.kind].region
        if region.shape is not None:
            closest = f"no input shape tried gave {region.text}"
        elif self.best <= 0:
            touched = self.touched or "the run that did was not kept"
            closest = f"the operand reached the region ({region.text}) but broke nothing: {touched}"
        else:
            closest = f"closest distance to the region ({region.text}) {self.best:.3g}"
        # Runs, not seconds: the note is part of the report, which one seed must make the same.
        if self.clock_stopped:
            note = (
                f"stopped by the clock after {runner.iterations} runs (its runs were slower than "
                f"{RUNS_PER_SECOND} a second); {closest}"
            )
        else:
            note = f"searched {runner.iterations} runs; {closest}"
        stalled = self.stalled()
        if stalled and self.unmeasurable():
            note += (
                f"; the operand was never a tensor the search could measure (a size or a Python "
                f"number) in {runner.reached} runs that reached it (it stopped there)"
            )
        elif stalled:
            note += (
                f", none closer in its last {runner.iterations - self.improved_at} runs (it stopped there)"
            )
        if runner.walls:
            (name, line), n = max(runner.walls.items(), key=lambda kv: kv[1])
            note += f"; the search stopped at the precondition on line {line} of {name} {n} times"
        return SearchReport(None, runner.iterations, self.seconds(), self.best, note, stalled)


@dataclass
class _Candidate:
    """A move tried: its inputs, its parameter deltas, and the run."""

    values: dict[str, Any]
    deltas: dict[str, torch.Tensor]
    ev: Evaluation


def _why_unbroken(outcome: SiteOutcome, run: int) -> str:
    """Why a run whose operand was in (or on the edge of) the region is no confirmation."""
    site = outcome.site
    at = f"in run {run}" + (
        f", operand value {outcome.bad_value:.3g}" if outcome.bad_value is not None else ""
    )
    if outcome.result == "upstream":
        return f"{at}, an operand was already NaN/INF before this op (an earlier op's finding comes first)"
    if outcome.phase == "backward" or site.discarded_by:
        where = site.discarded_by or "the program"
        return (
            f"{at}, the op's value there is discarded by {where} and the gradient through it "
            "stayed finite (the program masks it), so it is no bug"
        )
    return (
        f"{at}, the op's result stayed finite: an edge value the op accepts (as sqrt(0) or "
        "acos(1)), whose gradient alone is infinite, and this run computed no gradient through it"
    )


def _unreached() -> Evaluation:
    """A run that did not reach the site: the state before the first run, and after a collapsed
    step (which forces a restart)."""
    return Evaluation(None, None, float("inf"), {}, [], {}, {})


TINY = 1e-6  # an objective below this is "almost there": the landing moves are tried


def _raised_at(error: BaseException, user_files: frozenset[str]) -> tuple[str, int] | None:
    """(file name, line) of the user's precondition that stopped a run: an ``assert`` or a
    ``torch._assert`` (AssertionError), or any exception the user's own code raised itself (its
    innermost frame is theirs); not an error torch raised from inside (a bad index, a shape)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames or not (
        isinstance(error, AssertionError) or os.path.abspath(frames[-1].filename) in user_files
    ):
        return None
    where = None
    for fs in frames:
        if os.path.abspath(fs.filename) in user_files:
            where = (os.path.basename(fs.filename), fs.lineno or 0)
    return where


UNDERFLOW = 1e-46  # below float32's smallest subnormal (1.4e-45): what exp(-gap) must reach to be 0


def _landing_moves(
    cur: dict[str, Any],
    deltas: dict[str, torch.Tensor],
    ev: Evaluation,
    bounds: dict[str, float],
    params: dict[str, torch.Tensor],
    wfactor: WeightLimits,
) -> Iterator[tuple[str, dict[str, Any], dict[str, torch.Tensor]]]:
    """Moves for an operand a hair's breadth from the region: (how, inputs, deltas).

    * all the elements moved by a Newton step on ``log(objective)`` aimed below the smallest
      subnormal: on an exponential plateau (softmax, exp of a logit gap) the objective
      shrinks by a factor per unit, so the plain Newton step is far too short;
    * the elements (inputs, or moving weights) with the largest gradient, each moved alone by
      the Newton step computed in float64, with the float32 neighbours of that root (the root of
      a difference is rarely representable) and, for inputs, exactly 0;
    * the moving weights alone by Newton's step, in float64 deltas, then at the representable
      values either side of that root in the weights' own dtype (a root a rounding away: a
      float32 delta on a weight of 1 cannot reach it);
    * the same elements, each alone, by the log-Newton step;
    * the inputs' spread around their row mean scaled up, which pushes a logit gap further
      where the gradient has underflowed to nothing;
    * the weights' moves so far scaled up, the same push when the inputs are held in their range
      (a zero-initialised softmax regression whose logit gap stalls a little short of ~104).
    """
    at = _LandingPoint(cur, deltas, ev, bounds, params, wfactor)
    ranked = at.ranked_elements()
    if at.norm2 > 0.0:
        # First, because an operand that shrinks by a factor per unit of input (a softmax
        # probability, exp of a logit gap) is where most searches stall; a root that is
        # linear in one element is landed by the single-element moves below.
        yield at.log_newton_step()
    for _, k, i in ranked:
        yield from at.newton_steps_on_one_element(k, i)
    for _, k, i in ranked:
        yield at.log_newton_step_on_one_element(k, i)
    for factor in (2.0, 8.0):
        yield at.spread_scaled(factor)
    for factor in (2.0, 8.0):
        yield from at.moves_scaled(factor)
    # Last: it helps where a weight's root is a rounding away, and costs runs everywhere else.
    yield from at.weight_newton_steps()


class _LandingPoint:
    """The point a landing move starts from: the tensors that have a gradient (inputs, and
    moving weights as ``w:<key>``), and the objective's Newton reach."""

    def __init__(
        self,
        cur: dict[str, Any],
        deltas: dict[str, torch.Tensor],
        ev: Evaluation,
        bounds: dict[str, float],
        params: dict[str, torch.Tensor],
        wfactor: WeightLimits,
    ) -> None:
        self.cur, self.deltas, self.ev = cur, deltas, ev
        self.bounds, self.params, self.wfactor = bounds, params, wfactor
        tensors = {k: cur[k] for k in ev.grads if k in bounds and k in cur}
        tensors.update({"w:" + k: d for k, d in deltas.items() if "w:" + k in ev.grads and k in params})
        self.tensors = tensors
        self.grads = {
            k: ev.grads[k] for k in tensors if ev.grads[k].shape == tensors[k].shape and ev.grads[k].numel()
        }
        self.norm2 = sum(float((g.double() ** 2).sum()) for g in self.grads.values())
        # How far below the smallest subnormal, in Newton steps on log(objective).
        self.reach = max(1.0, math.log(ev.d / UNDERFLOW))

    def ranked_elements(self) -> list[tuple[float, str, int]]:
        """(|gradient|, tensor key, flat index) of the three elements with the largest gradient,
        among those carrying a quarter of its squared norm or more.

        One element moved alone lands only when it carries much of the gradient (log(x), a - b);
        spread over many (pixels through a network), such moves cost runs for nothing."""
        ranked = sorted(
            (
                (float(g.abs().flatten()[i]), k, int(i))
                for k, g in self.grads.items()
                for i in torch.topk(g.abs().flatten(), min(2, g.numel())).indices
            ),
            reverse=True,
        )[:3]
        return [r for r in ranked if r[0] > 0.0 and r[0] ** 2 >= 0.25 * self.norm2]

    def clipped(self, k: str, v: torch.Tensor) -> torch.Tensor:
        if k.startswith("w:"):
            return self.wfactor.clip(k[2:], v, self.params[k[2:]])
        return _clip(v, self.bounds[k])

    def apply(self, changes: dict[str, torch.Tensor]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """(inputs, deltas) with ``changes`` made (``w:`` keys are deltas)."""
        vals, nd = dict(self.cur), dict(self.deltas)
        for k, v in changes.items():
            if k.startswith("w:"):
                nd[k[2:]] = v
            else:
                vals[k] = v
        return vals, nd

    def element_at(self, k: str, i: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Tensor ``k`` with its flat element ``i`` set to ``x`` (clipped to its bound)."""
        v = self.tensors[k]
        c = v.detach().clone().flatten()
        c[i] = x.to(v.dtype)
        return {k: self.clipped(k, c.reshape(v.shape))}

    def log_newton_step(self) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
        ev, tensors = self.ev, self.tensors
        changes = {
            k: self.clipped(
                k, (tensors[k].double() - self.reach * ev.d * g.double() / self.norm2).to(tensors[k].dtype)
            )
            for k, g in self.grads.items()
        }
        return ("underflow: log-Newton step", *self.apply(changes))

    def newton_steps_on_one_element(
        self, k: str, i: int
    ) -> Iterator[tuple[str, dict[str, Any], dict[str, torch.Tensor]]]:
        v, g = self.tensors[k], float(self.grads[k].flatten()[i])
        root = float(v.flatten()[i]) - self.ev.d / g
        if k.startswith("w:"):
            yield from self._weight_roots(k, i, root)
            return
        at = torch.tensor(root, dtype=torch.float64).to(v.dtype)
        for t in (*_neighbours(at), torch.zeros((), dtype=v.dtype)):
            yield (f"Newton step on one element of {k} (float64)", *self.apply(self.element_at(k, i, t)))

    def _weight_roots(
        self, k: str, i: int, root: float
    ) -> Iterator[tuple[str, dict[str, Any], dict[str, torch.Tensor]]]:
        """A weight element at Newton's root, then at the representable values either side of it,
        in the weight's own dtype. A move is the weight at entry plus a delta: a float32 delta
        added to a weight of 1 reaches only multiples of 6e-8 near 0 (``gain + 1e-07`` is 0 only
        for the float32 nearest -1e-07), so these deltas are float64, exactly the value wanted
        minus the weight at entry (the tracer rounds the sum to the weight's dtype)."""
        p = self.params[k[2:]]
        at_entry = float(p.detach().flatten()[i])
        moved = torch.tensor(at_entry + root, dtype=torch.float64).to(p.dtype)
        for w in _neighbours(moved):
            c = self.tensors[k].detach().double().flatten().clone()
            c[i] = float(w) - at_entry
            delta = self.clipped(k, c.reshape(self.tensors[k].shape))
            yield (
                f"Newton step on one element of {k} (its representable neighbours)",
                *self.apply({k: delta}),
            )

    def weight_newton_steps(self) -> Iterator[tuple[str, dict[str, Any], dict[str, torch.Tensor]]]:
        weights = {k: g for k, g in self.grads.items() if k.startswith("w:")}
        norm2 = sum(float((g.double() ** 2).sum()) for g in weights.values())
        if norm2 == 0.0:
            return
        at_entry = {k: self.params[k[2:]].detach() for k in weights}
        moved = {
            k: (at_entry[k].double() + self.tensors[k].double() - self.ev.d * g.double() / norm2).to(
                at_entry[k].dtype
            )
            for k, g in weights.items()
        }
        for how, toward in (("", None), (", one value up", math.inf), (", one value down", -math.inf)):
            changes = {}
            for k, m in moved.items():
                if toward is not None:
                    # Only the elements the objective depends on take the neighbouring value.
                    m = torch.where(weights[k] != 0, torch.nextafter(m, m.new_tensor(toward)), m)
                changes[k] = self.clipped(k, m.double() - at_entry[k].double())
            yield (f"Newton step on the weights (float64){how}", *self.apply(changes))

    def log_newton_step_on_one_element(
        self, k: str, i: int
    ) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
        v, g = self.tensors[k], float(self.grads[k].flatten()[i])
        x = torch.tensor(float(v.flatten()[i]) - self.reach * self.ev.d / g, dtype=torch.float64)
        return (f"underflow: log-Newton step on one element of {k}", *self.apply(self.element_at(k, i, x)))

    def spread_scaled(self, factor: float) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
        cur = self.cur
        keys = [k for k in self.tensors if not k.startswith("w:")] or [k for k in self.bounds if k in cur]
        changes = {}
        for k in keys:
            v = cur[k]
            centre = v.mean(dim=-1, keepdim=True) if v.dim() else v
            changes[k] = _clip(centre + factor * (v - centre), self.bounds[k])
        return (f"underflow: input spread scaled by {factor:g}", *self.apply(changes))

    def moves_scaled(self, factor: float) -> Iterator[tuple[str, dict[str, Any], dict[str, torch.Tensor]]]:
        moving = {k: d for k, d in self.deltas.items() if k in self.params and d.numel() and bool(d.any())}
        if not moving:
            return
        changes = {"w:" + k: self.clipped("w:" + k, d * factor) for k, d in moving.items()}
        yield (f"underflow: weights' moves scaled by {factor:g}", *self.apply(changes))


def _neighbours(at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``at`` and the representable values either side of it in its dtype: the root of a
    difference is rarely representable, and Newton's step lands a rounding away from it."""
    return at, torch.nextafter(at, at.new_tensor(math.inf)), torch.nextafter(at, at.new_tensor(-math.inf))


def _clip(v: torch.Tensor, bound: float) -> torch.Tensor:
    return v.clamp(-bound, bound)


@dataclass
class WeightLimits:
    """How far the search may move each weight from its value at entry: ``factor`` times each
    element's magnitude (at least ``floor``). A free parameter (``Tracer.free_params``: free logits)
    may go as far as an input may, within ``free_factor`` times its largest magnitude (at least 1,
    and at least ``floor``): softmax needs a logit gap of ~104 to underflow in float32, and the
    witness says how far it went, with the other weights."""

    factor: float
    free_factor: float
    free: set[str] = field(default_factory=set)
    floor: float = 1.0

    def clip(self, key: str, d: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        if key in self.free:
            # its value is bounded, as an input's is: free logits start anywhere in [0, 1)
            bound = max(self.free_factor * max(1.0, float(p.abs().max()) if p.numel() else 1.0), self.floor)
            return (p + d).clamp(-bound, bound) - p
        limit = (p.abs() * self.factor).clamp_min(self.floor)
        return torch.maximum(torch.minimum(d, limit), -limit)


def _signed(
    cur: dict[str, Any],
    deltas: dict[str, torch.Tensor],
    ev: Evaluation,
    bounds: dict[str, float],
    a: float,
    params: dict[str, torch.Tensor],
    wfactor: WeightLimits,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    out = dict(cur)
    for k, g in ev.grads.items():
        if k.startswith("w:"):
            continue
        if k in bounds and k in cur:
            step = a * bounds[k] / 10.0
            out[k] = _clip(cur[k] - step * torch.sign(g), bounds[k])
    nd = dict(deltas)
    for k, d in deltas.items():
        g = ev.grads.get("w:" + k)
        if g is not None and k in params:
            step = a * params[k].abs().clamp_min(1.0)
            nd[k] = wfactor.clip(k, d - step * torch.sign(g), params[k])
    return out, nd


WEIGHT_SCALE_FLOOR = 1e-2  # the step scale of a tensor of zeros (a bias at init)
# A zero-initialised weight's random start at a restart, per unit of the restart's scale (0.5-4.5):
# about a standard init's spread for a layer of a few hundred inputs, well inside its bound of 1.
RESTART_WEIGHT_SCALE = 0.05


def _relative(
    deltas: dict[str, torch.Tensor],
    ev: Evaluation,
    a: float,
    params: dict[str, torch.Tensor],
    wfactor: WeightLimits,
) -> dict[str, torch.Tensor]:
    """Weight deltas moved along the gradient taken relative to each tensor's size: the weight
    whose relative change matters most moves by ``a`` times its tensor's largest magnitude."""
    scale = {
        k: max(float(params[k].abs().max()), WEIGHT_SCALE_FLOOR)
        for k in deltas
        if k in params and params[k].numel()
    }
    rel = {k: ev.grads["w:" + k].double() * s for k, s in scale.items() if "w:" + k in ev.grads}
    top = max((float(r.abs().max()) for r in rel.values() if r.numel()), default=0.0)
    nd = dict(deltas)
    if top == 0.0:
        return nd
    for k, r in rel.items():
        step = (a * scale[k] / top) * r
        nd[k] = wfactor.clip(k, (deltas[k].double() - step).to(deltas[k].dtype), params[k])
    return nd


def _weight_mutations(
    deltas: dict[str, torch.Tensor],
    params: dict[str, torch.Tensor],
    names: dict[str, str],
    wfactor: WeightLimits,
) -> Iterator[tuple[str, dict[str, torch.Tensor]]]:
    """A weight tensor all at 0 (as a zero-initialised or pruned layer is); single-number
    parameters (a learned temperature, scale or log-variance) moved to the values training can
    carry them to: across zero, to zero, a tenth of the way either side of
    it, a hair either side of it. A tenth matters where both extremes are walls: a temperature a
    hair below 0 underflows every ``exp(sim / tau)`` at once (0 / 0 upstream), while at -tau / 10
    only the largest similarities underflow, and a ratio of them goes to 0 from there."""
    for k, d in deltas.items():
        p = params.get(k)
        if p is None or not torch.is_floating_point(p):
            continue
        if p.numel() != 1:
            # a zero-initialised (or wholly pruned) layer: every unit's weights at 0 at once,
            # which no signed step reaches (they overshoot 0 by the step)
            if bool(p.any()):
                yield f"{names.get(k, k)} all at 0", {**deltas, k: wfactor.clip(k, -p.detach(), p)}
            continue
        v = float(p)
        name = names.get(k, k)
        for how, target in (
            (f"{name} negated", -v),
            (f"{name} at 0", 0.0),
            (f"{name} at a tenth of it, negated", -v * 0.1),
            (f"{name} at a tenth of it", v * 0.1),
            (f"{name} just above 0", abs(v) * 1e-3),
            (f"{name} just below 0", -abs(v) * 1e-3),
        ):
            if target == v:
                continue
            yield how, {**deltas, k: wfactor.clip(k, torch.full_like(d, target - v), p)}


def _newton(
    cur: dict[str, Any],
    deltas: dict[str, torch.Tensor],
    ev: Evaluation,
    bounds: dict[str, float],
    params: dict[str, torch.Tensor],
    wfactor: WeightLimits,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    norm2 = sum(float((g.double() ** 2).sum()) for g in ev.grads.values())
    if norm2 == 0.0:
        return dict(cur), dict(deltas)
    f = ev.d
    out = dict(cur)
    for k, g in ev.grads.items():
        if not k.startswith("w:") and k in bounds and k in cur:
            out[k] = _clip((cur[k].double() - f * g.double() / norm2).to(cur[k].dtype), bounds[k])
    nd = dict(deltas)
    for k, d in deltas.items():
        g = ev.grads.get("w:" + k)
        if g is not None and k in params:
            nd[k] = wfactor.clip(k, (d.double() - f * g.double() / norm2).to(d.dtype), params[k])
    return out, nd
