"""What ``--budget`` buys: runs and training steps, at fixed rates, with the clock as a safety cap.

One seed must give one report at any ``--jobs``, under any load, on any executor. So the
engine's budgets are counted, never timed: a site's budget of B seconds buys
``runs_for(B)`` runs of its program (a search's) or ``steps_for(B)`` training steps (a
training run's), whatever the machine. The clock only stops a search or a training run whose
runs are much slower than that rate (``CLOCK_CAP`` times the budget in seconds), and the
report then says "stopped by the clock after N runs" (``clock_cap``). That clock is the process's CPU time
(``cap_clock``), not the wall clock: a machine busy with other work gives the search fewer of
its seconds, not fewer of its cycles, so it is what a slow program costs and not how loaded the
machine is that stops it. Torch-free: the parent reads it too.
"""

from __future__ import annotations

import time

# About what a small program's run costs on one core (the engine corpus ran 75-120 runs a second
# on an idle machine, shrinking and start-up aside).
RUNS_PER_SECOND = 100
# A training step of a small tutorial program under the training tracer, likewise.
STEPS_PER_SECOND = 400
# A search or training run is stopped by the clock at this many times its budget in seconds ...
CLOCK_CAP = 4.0
# ... plus this many: a slice of a few runs (a tenth of a small budget) would otherwise have a cap
# of tenths of a second, which a busy machine's slower runs overrun at a load-dependent run, and
# what the clock leaves of such a slice would change what every later slice of the site does.
CLOCK_FLOOR = 0.5
# At most this many capped slices make one site's budget (``worker.TURNS``, then two entries).
SLICES_PER_SITE = 8


def cap_clock() -> float:
    """The clock of the safety cap: CPU seconds this process has used (all its threads)."""
    return time.process_time()


def clock_cap(seconds: float) -> float:
    """The CPU seconds at which the clock stops a search or training run worth ``seconds`` of budget."""
    return CLOCK_CAP * seconds + CLOCK_FLOOR


def runs_for(seconds: float) -> int:
    """The runs a budget of ``seconds`` buys (at least one)."""
    return max(1, round(seconds * RUNS_PER_SECOND))


def steps_for(seconds: float) -> int:
    """The training steps a budget of ``seconds`` buys (at least one)."""
    return max(1, round(seconds * STEPS_PER_SECOND))


def seconds_of_runs(runs: float) -> float:
    """The budget, in seconds of ``--budget``, that buys ``runs`` runs."""
    return runs / RUNS_PER_SECOND
