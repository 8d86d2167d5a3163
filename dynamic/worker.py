"""The worker process: ``python -m grist_lsp.dynamic.worker``.

Reads one JSON request on stdin (``path``, ``text``, ``targets``: site JSON to
confirm, ``sites``: every site of the file, for precise matching, ``budget``,
``seed``, ``entries``, ``project_root``, ``record_timeout``), runs the user's
program only here, and writes JSON lines to the file descriptor it was given
in ``GRIST_RESULT_FD`` (stdout is handed to the user's program's prints,
redirected to stderr):

* a ``SiteReport`` per target (``protocol.py``);
* a ``RunError`` when the program could not run (an explicit entry that raised included);
* instead of all these, a ``BadEntry`` for an explicit entry that cannot be used (no such
  function, a wrong return value): every explicit entry is run once, first;
* ``Done`` at the end.

Resource limits are set by the parent (``engine``): RLIMIT_AS before exec, and
the parent kills the process on its wall-clock deadline. A per-run interval
timer stops one run of the user's program that takes too long.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import math
import os
import re
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from grist_lsp.analyzer.catalogue import KINDS, Region, row
from grist_lsp.model import FACTORY_KEY, Site, Witness, counted, site_from_json
from grist_lsp.notebooks import program_text

from . import entries as E
from . import protocol
from .absent_torchvision import stand_in_for_absent_packages
from .budget import (
    CLOCK_CAP,
    RUNS_PER_SECOND,
    STEPS_PER_SECOND,
    clock_cap,
    runs_for,
    seconds_of_runs,
    steps_for,
)
from .failures import RunTimeout, describe_failure, error_kind, user_location
from .lazy_dynamo import skip_dynamo_import
from .protocol import BadEntry, Done, Message, RunError, SiteReport
from .search import Found, Runner, Search, SearchReport, SearchSettings
from .tracing import LOOP_ROUNDS, SiteOutcome, Tracer
from .training import TrainingSettings, train_search
from .witness import describe, first_rows, shrink, to_value

PRIMARY_SHARE = 0.65  # of a site's budget, for the first entry that reaches it
# Training steps (``backward`` calls) a recording run watches for the sites a program reaches: a
# script that trains until it is solved would otherwise run to the timeout, whether or not its
# loop calls ``backward`` where the static pass sees it (a reinforcement-learning script calls it
# in a function once per episode). A run cut short here says so in its sites' notes.
RECORD_STEPS = 20
# Rounds of a loop that does not train (``tracing.LOOP_ROUNDS``) a run past a witness's site goes
# (``_run_past_site``): one more meeting of the site than the first will do.
PAST_SITE_ROUNDS = 2
# Every budget below is counted in runs of the program (a search's) and training steps (a
# training run's), bought at fixed rates (``budget.runs_for``, ``budget.steps_for``), so
# that what the worker reports depends on the seed and the options, never on the machine's load.
# A training program's sites get GRIST's training runs and short per-site searches in turns, in
# slices of one site's budget that grow: a bug either kind reaches quickly costs the file little,
# whichever kind it is, and neither waits long behind the other. Training runs get 0.3 of a
# budget in all (600 steps at the default budget): what they do not find there (a bug no state of
# training reaches) is left to the per-site searches that follow, which still have most of theirs.
# On the training bench (2026-12-04) every bug a training run found took at most 25 steps, while
# the searches that found the others took up to 120 runs; a site neither breaks pays every
# training step, so the longest slice is the search's.
TURNS: tuple[tuple[str, float], ...] = (
    ("train", 0.05),
    ("search", 0.05),
    ("train", 0.10),
    ("search", 0.25),
    ("train", 0.15),
)
# A program whose runs are costly (``FEW_ROWS_WORK``) has costly training steps too (a GAN's: two
# seconds), while its searches run on a few rows: the searches go first.
COSTLY_TURNS: tuple[tuple[str, float], ...] = (("search", 0.30), *[t for t in TURNS if t[0] == "train"])
MIN_RUNS = 20  # a share of a site's budget smaller than this many runs is not worth a search of its own
# A run that has computed this many multiply-adds (``tracing._work``) by the site's first
# evaluation costs tens of milliseconds on a core (a U-Net on a batch of 64x64 images: 7e9, a
# third of a second), and its search runs on ``FEW_ROWS`` rows. The engine corpus and the
# training bench stay below 1e7.
FEW_ROWS_WORK = 500_000_000
FEW_ROWS = 2
# Tensor elements all paused searches may keep (float32: 200 MB); past it a search starts afresh
# next time, as it did before searches paused (a large model's parameter moves, many sites).
PAUSED_ELEMENTS = 50_000_000
RESEED = 2  # seed offset between one site's successive searches (seed + 1 is the second entry's)


@dataclass
class Assignment:
    program: E.Program
    examples: dict[str, Any]
    outcome: SiteOutcome | None  # the site's first evaluation in the recording run, when known


def _says_why(prog: E.Program, error: BaseException) -> bool:
    """Whether a program's failure to reach the sites is worth an error verdict: an entry the user
    gave or the file run as a script; a test or an importing script only when an import failed
    (the module under check, or one it needs, cannot be loaded: nothing else will run either),
    since a test may fail for reasons of its own."""
    return isinstance(prog, (E.EntryProgram, E.ScriptProgram)) or error_kind(error) == "import-error"


def candidates(path: str, text: str, req: dict) -> Iterator[E.Program | BaseException]:
    """Programs in the order the contract gives: explicit entries, tests, script, probes.

    Probing imports the module, which runs its top-level code: the caller times each step
    and stops pulling as soon as every target is reached. An exception raised while
    importing for probes is yielded, for the caller to report if nothing else ran; so is the
    ``EntryError`` of an explicit entry that cannot be parsed (then nothing more comes).
    """
    target = os.path.abspath(path)
    root = E.project_root_for(path, req.get("project_root"))
    seed = int(req.get("seed", 0))
    base = E.ProgramBase(target_file=target, texts={target: text}, seed=seed)
    # Absolute script path -> its command-line arguments (``[tool.grist] script-args``).
    script_args: dict[str, list[str]] = {
        os.path.abspath(k): list(v) for k, v in (req.get("script_args") or {}).items()
    }
    for spec in req.get("entries") or []:
        try:
            file, func = E.parse_entry(spec, root)
        except E.EntryError as e:
            yield e
            return
        yield E.EntryProgram(
            label=f"entry:{file}:{func}",
            user_files=frozenset({target, file}),
            entry_file=file,
            function=func,
            text=text,
            **base,
        )
    via = req.get("via")
    if via:
        # The user checked ``via`` (a test file or a script) and it imports this module: enter
        # through it alone, so that the finding is what that program does.
        via = os.path.abspath(via)
        src = program_text(via)
        tests = E.test_functions(via, src)
        scripts = [via] if not tests and E.is_script(src) else []
    else:
        tests = E.own_tests(target, text) + E.test_entries(path, root)
        scripts = E.importer_scripts(path, root)
    for file, func in tests:
        yield E.TestProgram(
            label=f"test:{file}::{func}",
            user_files=frozenset({target, file}),
            test_file=file,
            function=func,
            text=text if file == target else None,
            **base,
        )
    for file in scripts:
        yield E.RunProgram(
            label=f"run:{file}",
            user_files=frozenset({target, file}),
            script_file=file,
            argv=script_args.get(file, []),
            **base,
        )
    if via:
        return
    if E.is_script(text):
        yield E.ScriptProgram(
            label=f"script:{path}",
            user_files=frozenset({target}),
            text=text,
            argv=script_args.get(target, []),
            **base,
        )
        if E.import_runs_loops(text):
            return
    try:
        progs = E.probe_programs(path, text, seed)
    except BaseException as e:  # importing the module for probing failed (or timed out)
        yield e
        return
    yield from progs


# Runs the search for a witness within the program's range gets, after one beyond it: growing
# weights take a few gradient phases (about 85 runs for a VAE's log-variance, 81 for a float16
# attention score).
REALISTIC_RUNS = 150
# That search's safety cap, in multiples of what its budget's would be: room to finish its runs on
# a slow or busy machine, since its witness must not depend on the machine (one the clock stops
# is discarded, and the first witness stands).
REALISTIC_CLOCK_ROOM = 5.0
# How far that search may move a weight at least: with the inputs held in the program's range, the
# weights are all it may move, and a training run that diverges takes a zero-initialised layer's
# weights well past 1 (float32's softmax underflows to 0 at a logit gap of ~104, its exp overflows
# past 88: inputs of magnitude 3 need weights of about 30). The witness says how far they went.
REALISTIC_WEIGHT_FLOOR = 100.0


def _measured_inputs(values: dict[str, Any], examples: dict[str, Any]) -> list[str]:
    """The inputs whose range a witness is graded against: float tensors the program gave a value."""
    return [
        k
        for k, v in values.items()
        if isinstance(v, torch.Tensor)
        and torch.is_floating_point(v)
        and isinstance(examples.get(k), torch.Tensor)
        and examples[k].numel()
    ]


def _magnitudes(examples: dict[str, Any]) -> dict[str, float]:
    """The largest magnitude of each float input the program gave."""
    return {k: float(examples[k].abs().max()) for k in _measured_inputs(examples, examples)}


def _lowest(examples: dict[str, Any]) -> dict[str, float]:
    """The smallest value of each float input the program gave."""
    return {k: float(examples[k].min()) for k in _measured_inputs(examples, examples)}


def _beyond_examples(values: dict[str, Any], examples: dict[str, Any]) -> float:
    """How many times past the program's own inputs a witness's inputs go (<= 1: within them). An
    input the program gave only values >= 0 (pixels in [0, 1]) that went negative is past them by
    as much again: -0.8 for [0, 1] is 1.8 times."""
    beyond = 0.0
    for k in _measured_inputs(values, examples):
        v, ex = values[k], examples[k]
        if v.numel():
            top = max(float(ex.abs().max()), 1e-30)
            beyond = max(beyond, float(v.abs().max()) / top)
            below = float(v.min())
            if float(ex.min()) >= 0 > below:
                beyond = max(beyond, 1.0 - below / top)
    return beyond


class Worker:
    """Confirms the target sites of one file; owns the result stream."""

    def __init__(self, req: dict, out: Callable[[Message], None]) -> None:
        self.req = req
        self.out = out
        self.path: str = req["path"]
        self.text: str = req["text"]
        self.target = os.path.abspath(self.path)
        self.targets = [site_from_json(s) for s in req["targets"]]
        self.sites = [site_from_json(s) for s in req.get("sites") or req["targets"]]
        self.budget = float(req.get("budget", 5.0))
        self.runs = runs_for(self.budget)  # what one site may cost in all, in runs
        self.seed = int(req.get("seed", 0))
        self.record_timeout = float(req.get("record_timeout", 20.0))
        # The parent kills this process ``worker_seconds`` after it said it was ready.
        self.t_end = time.monotonic() + float(req.get("worker_seconds", 1e9))
        self.errors: list[tuple[str, int, str]] = []  # (message, line, error kind)
        self.gen = candidates(self.path, self.text, req)
        # Explicit entries not yet pulled from ``gen``: each is run once even when an earlier one
        # reached every site, so that one that cannot be used is said, never skipped.
        self.entries_unpulled = len(req.get("entries") or [])
        # Every entry recorded so far, with the sites it reached: second chances come from here first.
        self.pool: list[tuple[E.Program, set[str], dict[str, Any]]] = []
        # What real entries (script, tests, explicit entries) pass to the file's functions, and the
        # sites they reach: a probe's witness for such a site must use inputs callers could pass.
        self.callers = CallerDomains(self.target)
        self.real_reached: set[str] = set()
        # Sites broken by a run that searched another site, and the assignment of that search.
        self.harvest: dict[str, Found] = {}
        self.harvested_by: dict[str, Assignment] = {}
        self.reported: set[str] = set()  # sites whose witness was sent
        self.turns: dict[str, int] = {}  # how many short searches (TURNS) each site already had
        # Runs each site has had so far: its own searches, and its share of every training run that
        # watched it while it was open (a step at the rate of a run's worth of ``--budget``).
        self.spent: defaultdict[str, float] = defaultdict(float)
        self.last_note: dict[str, str] = {}  # why the site's latest attempt found nothing
        # Entry label -> the targets of its last training run that ended before its time, or None
        # when that run steered nothing: running it again would only repeat it (``TrainingReport``).
        self.trained_out: dict[str, frozenset[str] | None] = {}
        # Entry label -> how its recording run was cut short (steps, or the clock) before it reached
        # every site it was watching for: said in the note of the sites no entry reached.
        self.cut_short: dict[str, str] = {}
        # (site key, entry label) -> its search, stopped at the end of its slice of runs: the next
        # slice goes on from there.
        self.paused: dict[tuple[str, str], Search] = {}

    def emit_error(self, message: str, line: int, kind: str = "other") -> None:
        self.errors.append((message, line, kind))

    def _timed(self, seconds: float, fn: Callable[[], Any], cpu: bool = False) -> Any:
        """``fn()``, stopped by ``RunTimeout`` after ``seconds``: of the wall clock (a recording
        run: the user's ``timeout``), or with ``cpu`` of this process's CPU time, the clock of the
        engine's safety caps (``budget.cap_clock``), which a busy machine does not stretch. A run
        that waits rather than works is left to the parent's wall-clock deadline."""

        def ring(signum: int, frame: Any) -> None:
            raise RunTimeout()

        which, sig = (signal.ITIMER_PROF, signal.SIGPROF) if cpu else (signal.ITIMER_REAL, signal.SIGALRM)
        old = signal.signal(sig, ring)
        # It rings again every twentieth of a second until ``fn`` returns: a run of the user's
        # program hands the first ring back as its own error (``trace_call``), and ``fn`` (a
        # shrink, say) would go on to its next run with no clock at all.
        signal.setitimer(which, max(seconds, 0.05), 0.05)
        try:
            return fn()
        finally:
            signal.setitimer(which, 0)
            signal.signal(sig, old)

    def assign(self, keys: set[str], report: bool = True, reserve: float = 0.0) -> dict[str, Assignment]:
        """Record runs, entry by entry, until every key is reached by some entry.

        Resumes where the previous call stopped: a second call finds *other* entries that
        reach the sites the first entry's search could not break.
        """
        todo = set(keys)
        assigned: dict[str, Assignment] = {}
        failures: list[tuple[str, frozenset[str], BaseException, str | None]] = []
        ran_any = False
        gen = self.gen
        while todo or self.entries_unpulled:
            # Stop looking for entries in time to search (``reserve`` seconds) before the parent's deadline.
            left = self.t_end - reserve - time.monotonic()
            if left <= 0.5:
                break
            limit = min(self.record_timeout, left)
            try:
                prog = self._timed(limit, lambda: next(gen, None))
            except RunTimeout as e:
                failures.append((f"probe:{self.path}", frozenset({self.target}), e, None))
                break
            if prog is None:
                break
            if isinstance(prog, E.EntryError):
                raise prog
            if isinstance(prog, E.EntryProgram):
                self.entries_unpulled -= 1
            if isinstance(prog, BaseException):
                if not ran_any:
                    failures.append((f"probe:{self.path}", frozenset({self.target}), prog, None))
                break
            try:
                self._timed(limit, lambda: prog.produce_only(prog.setup))
            except E.EntryError:
                raise  # an explicit entry that cannot be used: a usage error, never a fallback
            except BaseException as e:
                if _says_why(prog, e):
                    failures.append((prog.label, prog.user_files, e, prog.script))
                continue
            cfg = prog.tracer_config(
                sites=self.sites,
                record=True,
                stop_when_all_reached=True,
                watch=frozenset(todo),
                stop_after_steps=RECORD_STEPS,
                stop_after_rounds=LOOP_ROUNDS,
            )
            if isinstance(prog, E.ProbeProgram):
                tracer, _, error = self._timed(limit, lambda: prog.run(cfg))
            else:
                with self.callers.watching():
                    tracer, _, error = self._timed(limit, lambda: prog.run(cfg))
                if isinstance(error, E.EntryError):
                    raise error  # the entry returned the wrong thing (``EntryProgram.prepare``)
                self.real_reached.update(tracer.reached)
            if not todo <= set(tracer.reached):
                if isinstance(error, RunTimeout):
                    self.cut_short[prog.label] = f"stopped by the clock after {limit:.0f} s"
                elif tracer.steps >= RECORD_STEPS:
                    self.cut_short[prog.label] = f"stopped after {RECORD_STEPS} training steps"
            self.pool.append((prog, set(tracer.reached), dict(tracer.recorded)))
            prog.input_names.update(tracer.input_names)
            reached = [k for k in tracer.reached if k in todo]
            for k in reached:
                assigned[k] = Assignment(prog, dict(tracer.recorded), tracer.reached[k])
                todo.discard(k)
            if error is None or reached:
                ran_any = True
            elif _says_why(prog, error):
                failures.append((prog.label, prog.user_files, error, prog.script))
        # An explicit entry that failed is said even when other programs reached every site: the
        # user named it, and a report from a probe instead would hide that it never ran.
        failed_entry = next((f for f in failures if f[0].startswith("entry:")), None)
        if (failed_entry or (todo and failures)) and report:
            label, files, exc, script = failed_entry or failures[0]
            failure = describe_failure(
                exc,
                {os.path.abspath(f) for f in files},
                label,
                self.req.get("memory_mb"),
                script=script,
                root=self.req.get("project_root"),
            )
            loc = user_location(exc, {self.target})
            # the failure's own line is in another file when the target is not on the traceback
            self.emit_error(f"{self.path}: {failure.message}", loc[1] if loc else 1, failure.kind)
        return assigned

    def run(self) -> None:
        try:
            self._run()
        except E.EntryError as e:
            # Explicit entries are all recorded first (``assign``), so this comes before any
            # search: the parent stops the check with it rather than report what a probe found.
            self.out(BadEntry(str(e)))
            self.out(Done())

    def _run(self) -> None:
        assigned = self.assign(
            {s.key for s in self.targets}, reserve=CLOCK_CAP * self.budget * len(self.targets) + 2.0
        )
        for message, line, kind in self.errors:
            self.out(RunError(message, line, kind=kind))
        trained = self.train(assigned)
        unfound: dict[str, E.Program] = {}
        for site in self.targets:
            if site.key in trained or self.take_harvest(site):
                continue
            a = assigned.get(site.key)
            if a is None:
                self.out(SiteReport(key=site.key, witness=None, entry=None, note=self.unreached_note()))
                continue
            # Most of what is left of the budget on the first entry that reaches the site; the rest
            # on another entry (a probe of the function itself reaches shapes the script never makes).
            seed = self.seed + RESEED * self.turns.get(site.key, 0)
            left = self.left(site.key)
            if left < MIN_RUNS:
                self.out_unfound(site, a.program.label)
                continue
            # One search gets all that is left when another entry would get too little. (When no
            # other entry reaches the site, the second slice resumes this search: nothing is lost.)
            last = left * (1 - PRIMARY_SHARE) < MIN_RUNS
            found = self.search_one(site, a, left if last else round(left * PRIMARY_SHARE), seed, final=last)
            if not found and not last:
                unfound[site.key] = a.program
        if unfound:
            more: dict[str, Assignment] = {}
            for key, primary in unfound.items():
                for prog, reached, recorded in self.pool:
                    if key in reached and prog is not primary and key not in more:
                        more[key] = Assignment(prog, recorded, None)
            try:
                more.update(
                    self.assign(
                        set(unfound) - set(more),
                        report=False,
                        reserve=CLOCK_CAP * seconds_of_runs(sum(self.left(k) for k in unfound)) + 2.0,
                    )
                )
            except RunTimeout:
                pass
            for site in self.targets:
                if site.key not in unfound or self.take_harvest(site):
                    continue
                a = more.get(site.key) or assigned[site.key]
                seed = self.seed if site.key in more else self.seed + 1
                self.search_one(
                    site,
                    a,
                    max(self.left(site.key), MIN_RUNS),
                    seed,
                    final=True,
                    tried=unfound[site.key].label,
                )
        self.out(Done())

    def unreached_note(self) -> str:
        """Why a site has no witness when no entry reached it, and which recording runs were cut short."""
        note = "not reached by any entry (explicit entries, tests, script, probes)"
        cuts = "; ".join(
            f"the recording run of {label} was cut short ({how})" for label, how in self.cut_short.items()
        )
        return f"{note}; {cuts}" if cuts else note

    def train(self, assigned: dict[str, Assignment]) -> set[str]:
        """GRIST's own setting first: a program that trains runs as written, watching every site
        while its inputs are steered (``training.py``); each run ends at one finding, so runs
        repeat for the sites still open. Training runs and short per-site searches take turns
        (``TURNS``). Returns the keys found either way."""
        groups: dict[str, tuple[Assignment, set[str]]] = {}
        for site in self.targets:
            hit = assigned.get(site.key)
            if hit is None or isinstance(hit.program, E.ProbeProgram) or not hit.program.trains:
                continue
            groups.setdefault(hit.program.label, (hit, set()))[1].add(site.key)
        by_key = {s.key: s for s in self.targets}
        found: set[str] = set()
        for a, todo in groups.values():
            for turn, share in TURNS if not self._costly(a) else COSTLY_TURNS:
                open_keys = todo - found - set(self.harvest)
                if turn == "train":
                    found |= self.training_runs(a, open_keys, by_key, steps_for(self.budget * share))
                else:
                    found |= self.quick_searches(a, [by_key[k] for k in sorted(open_keys)], share)
        return found

    @staticmethod
    def _costly(a: Assignment) -> bool:
        """Whether ``a``'s runs are costly enough to search on a few rows (``_few_rows``)."""
        return a.outcome is not None and a.outcome.work >= FEW_ROWS_WORK

    def training_runs(self, a: Assignment, todo: set[str], by_key: dict[str, Site], steps: int) -> set[str]:
        """Training runs of ``a``'s program for ``steps`` training steps in all, one run per
        finding; the keys found. The clock caps each run at ``clock_cap`` of what its steps
        are worth (a program whose steps are slow)."""
        found: set[str] = set()
        todo = set(todo)
        label = a.program.label
        while todo and steps > 0 and not self.would_repeat(label, todo):
            settings = TrainingSettings(seconds=clock_cap(steps / STEPS_PER_SECOND), max_steps=steps)
            targets = frozenset(todo)
            try:
                report = self._timed(
                    settings.seconds + self.record_timeout,
                    lambda: train_search(a.program, self.sites, todo, settings),
                    cpu=True,
                )
            except RunTimeout:
                report = None
            # The run watched every open site at once: each pays its share, in runs. A run the
            # clock stopped pays all its steps, as a run it did not stop would: the steps the
            # clock left over depend on the machine's load, and what they bought next (the
            # searches' runs) would too, which one seed must not.
            used = steps if report is None or report.timed_out else max(report.steps, 1)
            steps -= used
            for key in todo:
                self.spent[key] += used * RUNS_PER_SECOND / STEPS_PER_SECOND / len(todo)
            if report is None:
                break
            if not (report.timed_out or report.out_of_steps):
                self.trained_out[label] = targets if report.steered else None
            if report.found is None:
                for key in todo:
                    self.last_note[key] = f"a training run (GRIST): {report.note}"
                break
            t = report.found
            site = by_key[t.outcome.site.key]
            how = Found(
                t.outcome,
                t.inputs,
                t.deltas,
                t.param_names,
                t.steps,
                t.seconds,
                f"training run (GRIST), {counted(t.steps, 'step')}",
                weights=t.weights,
            )
            self.report_found(a, site, how, SearchSettings(budget=self.budget, seed=self.seed), steps=t.steps)
            found.add(site.key)
            todo.discard(site.key)
        return found

    def would_repeat(self, label: str, todo: set[str]) -> bool:
        """Whether a training run of entry ``label`` for ``todo`` would only repeat one that ended already."""
        if label not in self.trained_out:
            return False
        targets = self.trained_out[label]
        return targets is None or targets == todo

    def quick_searches(self, a: Assignment, sites: list[Site], share: float) -> set[str]:
        """A short search (``share`` of a site's runs) of each of ``sites``, each from a seed of its
        own; returns the keys found."""
        found = set()
        for site in sites:
            if site.key in self.harvest:
                continue
            rounds = self.turns.get(site.key, 0)
            self.turns[site.key] = rounds + 1
            if self.search_one(site, a, round(self.runs * share), self.seed + RESEED * rounds):
                found.add(site.key)
        return found

    def left(self, key: str) -> int:
        """Runs of its budget ``key`` has not used yet."""
        return max(round(self.runs - self.spent[key]), 0)

    def out_unfound(self, site: Site, entry: str) -> None:
        """Report ``site`` as searched and not broken, with why its latest attempt stopped."""
        note = self.last_note.get(site.key, f"the budget ({self.budget:g} s) ran out before a search")
        self.out(SiteReport(key=site.key, witness=None, entry=entry, note=note))

    def take_harvest(self, site: Site) -> bool:
        """Report ``site`` from a run that broke it while another site was searched (no search of its own)."""
        found = self.harvest.pop(site.key, None)
        if found is None:
            return False
        a = self.harvested_by[site.key]
        self.report_found(a, site, found, SearchSettings(budget=self.budget, seed=self.seed), harvested=True)
        return True

    def search_one(
        self,
        site: Site,
        a: Assignment,
        runs: int,
        seed: int,
        final: bool = False,
        tried: str | None = None,
    ) -> bool:
        """Search one site from one entry for ``runs`` runs; report it when found or when this was
        the last try."""
        settings = SearchSettings(budget=seconds_of_runs(runs), seed=seed, harvest=self.harvest)
        before = set(self.harvest)
        program = a.program
        if isinstance(program, E.ProbeProgram) and site.key in self.real_reached:
            # Real entries reach this site: the probe searches only among inputs they could pass.
            settings.supports = self.callers.supports(program.qualname)
        report, used = self._search(site, a, settings, final)
        self.spent[site.key] += used
        for key in set(self.harvest) - before:
            self.harvested_by[key] = a
        if report.found is None and settings.supports:
            kept = ", ".join(f"{k} {v}" for k, v in settings.supports.items())
            report.note = f"a {PROBE_WORDS} kept to inputs real callers pass ({kept}): {report.note}"
        if report.found is None:
            entries = (
                a.program.label if tried in (None, a.program.label) else f"{tried}, then {a.program.label}"
            )
            self.last_note[site.key] = f"{report.note} from {entries}"
            if final:
                self.out_unfound(site, a.program.label)
            return False
        self.report_found(a, site, report.found, settings)
        return True

    def _search(
        self, site: Site, a: Assignment, settings: SearchSettings, final: bool
    ) -> tuple[SearchReport, int]:
        """A search of ``site`` from ``a``'s entry for ``settings.budget`` (in runs), and the runs
        it used; a search of the same pair that an earlier slice stopped goes on (keeping its own
        seed and settings) rather than restarting from the recording. The ``final`` slice keeps
        nothing."""
        key = (site.key, a.program.label)
        paused = self.paused.pop(key, None)
        s = paused or Search(
            a.program, site, self.sites, self._few_rows(site, a) or a.examples, settings, None
        )
        before = s.runner.iterations
        budget = settings.budget
        report = self._timed(
            clock_cap(budget) + self.record_timeout,
            (lambda: s.resume(budget)) if paused is not None else s.run,
            cpu=True,
        )
        used = s.runner.iterations - before
        held = sum(p.held() for p in self.paused.values())
        if report.found is None and s.resumable and not final and held + s.held() <= PAUSED_ELEMENTS:
            self.paused[key] = s
        return report, used

    def _within_range(
        self, site: Site, a: Assignment, settings: SearchSettings
    ) -> tuple[SearchReport | None, int]:
        """A second search for a witness a maintainer believes, after one that took the inputs past
        the range the program used: inputs kept within that range, the weights free to move, as
        training moves them (a VAE's log-variance overflows because its encoder's weights grow, not
        because an image has pixels of 46). ``REALISTIC_RUNS`` runs; its report when it finds one
        before its runs (not the clock) run out, and the runs it used."""
        # an input the program only gives >= 0 (pixels, counts) stays >= 0
        signs = {k: "non-negative" for k, lo in _lowest(a.examples).items() if lo >= 0}
        kept = SearchSettings(
            budget=seconds_of_runs(REALISTIC_RUNS),
            seed=settings.seed,
            bound_factor=1.0,
            within_examples=True,
            weight_factor=settings.weight_factor,
            weight_floor=REALISTIC_WEIGHT_FLOOR,
            supports={**signs, **settings.supports},
            clock_room=REALISTIC_CLOCK_ROOM,
        )
        s = Search(a.program, site, self.sites, a.examples, kept, None)
        try:
            cap = clock_cap(kept.budget) * kept.clock_room + self.record_timeout
            report = self._timed(cap, s.run, cpu=True)
        except RunTimeout:
            return None, s.runner.iterations  # the first witness stands
        found = report.found
        if found is None or s.clock_stopped or _beyond_examples(found.values, a.examples) > 1:
            return None, s.runner.iterations
        found.how = f"{found.how}, inputs kept in the program's range"
        return report, s.runner.iterations

    def _few_rows(self, site: Site, a: Assignment) -> dict[str, Any] | None:
        """The first ``FEW_ROWS`` rows of each recorded input, to search a program whose run up to
        the site is costly (a U-Net on a batch of 64x64 images: a third of a second) at a fraction
        of the cost: a witness is shrunk to one row in the end anyway. None when the run is cheap,
        no input has more rows, or a run on the rows does not reach the site (or fails on the way)."""
        if not self._costly(a):
            return None
        rows = first_rows(a.examples, FEW_ROWS)
        if all(v is a.examples[k] for k, v in rows.items()):
            return None
        runner = Runner(a.program, site, self.sites)
        try:
            ev = self._timed(self.record_timeout, lambda: runner.evaluate(rows, grad=False), cpu=True)
        except RunTimeout:
            return None
        return rows if ev.outcome is not None and ev.error is None else None

    def report_found(
        self,
        a: Assignment,
        site: Site,
        found: Found,
        settings: SearchSettings,
        steps: int | None = None,
        harvested: bool = False,
    ) -> None:
        """Send ``site``'s witness (shrunk, described) for what ``found`` broke."""
        for key in [k for k in self.paused if k[0] == site.key]:
            del self.paused[key]  # found, however: its paused searches are done
        witness, text = self.make_witness(a, site, found, settings, steps=steps)
        if (
            (witness.beyond_examples or 0.0) > 1
            and not harvested  # the run that broke it had its own follow-up
            and settings.move_weights
            and not self._costly(a)
        ):
            # Graded on the shrunk witness, whichever way it was found (a search, a GRIST training
            # run that steered the inputs): shrinking alone may bring it within range.
            realistic, used = self._within_range(site, a, settings)
            self.spent[site.key] += used
            if realistic is not None and realistic.found is not None:
                better, better_text = self.make_witness(a, site, realistic.found, settings)
                if (better.beyond_examples or 0.0) <= 1:
                    found, witness, text = realistic.found, better, better_text
        self.out(SiteReport(site.key, witness, a.program.label, note=found.how, message=text))
        self.reported.add(site.key)
        self.sweep(a, site, found)

    @staticmethod
    def _shapes_kept(values: dict[str, Any], before: dict[str, Any]) -> bool:
        return all(
            not isinstance(v, torch.Tensor) or v.shape == before[k].shape
            for k, v in values.items()
            if isinstance(before.get(k), torch.Tensor)
        )

    def _run_past_site(
        self,
        a: Assignment,
        values: dict[str, Any],
        deltas: dict[str, torch.Tensor],
        step: int,
        weights: dict[str, torch.Tensor],
    ) -> tuple[Tracer, BaseException | None] | None:
        """One run of the program given ``values`` (and moves), on through the training step that
        reached the site (or to its end), watching every site: the tracer and the program's error,
        None when the clock stopped it."""
        cfg = a.program.tracer_config(
            sites=self.sites,
            subs={k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()},
            weight_subs={k: d.clone() for k, d in deltas.items()},
            weight_values={k: w.clone() for k, w in weights.items()},
            stop_after_steps=step + 1,
            # A loop that does not train has no step to stop after: a round past the site will do
            # (an endless evaluation loop would otherwise run to the clock, growing all the while).
            stop_after_rounds=PAST_SITE_ROUNDS,
        )
        try:  # the mode catches the timer's exception too: it comes back as ``error``
            tracer, _, error = self._timed(
                CLOCK_CAP * min(2.0, self.budget), lambda: a.program.run(cfg), cpu=True
            )
        except RunTimeout:
            return None
        return tracer, error

    def sweep(self, a: Assignment, site: Site, found: Found) -> None:
        """The open sites that the moves which broke ``site`` break too, from one run past it: a
        tutorial takes ``torch.log(hypothesis)`` of one softmax in several statements, and each
        would otherwise walk its own search the whole way from the recording. What the run breaks
        at the step the witness reached goes to the harvest, shrunk and replayed like any other."""
        open_keys = {s.key for s in self.targets} - self.reported - set(self.harvest) - {site.key}
        if not open_keys:
            return
        step = found.aimed_step
        ran = self._run_past_site(a, found.values, found.run_deltas, step, found.weights)
        if ran is None:
            return
        tracer = ran[0]
        for key, other in tracer.reached.items():
            if key in open_keys and other.found and other.step == step:
                self.harvest[key] = Found.seen(
                    other,
                    tracer,
                    found.values,
                    found.run_deltas,
                    found.weights,
                    found.iterations,
                    found.seconds,
                    f"the witness of line {site.span.start_line} breaks it too",
                )
                self.harvested_by[key] = a

    def make_witness(
        self, a: Assignment, site: Site, found: Found, settings: SearchSettings, steps: int | None = None
    ) -> tuple[Witness, str]:
        target_step = found.aimed_step
        runner = Runner(a.program, site, self.sites, supports=settings.supports, target_step=target_step)
        # A search's moves are deltas on the weights at entry, replayed by the same addition, so
        # just as exact as a training run's state.
        run_deltas = found.run_deltas

        def fails(values: dict[str, Any]) -> bool:
            got = runner.evaluate(values, run_deltas or None, grad=False, weights=found.weights).outcome
            return got is not None and got.found and got.phase == found.outcome.phase

        values = found.values
        outcome = found.outcome
        try:
            # Shrinking is bounded by its tries (``shrink``); the timer is a safety cap only.
            values = self._timed(
                CLOCK_CAP * min(2.0, self.budget) + 1.0,
                lambda: shrink(values, fails, within=_magnitudes(a.examples)),
                cpu=True,
            )
            if not self._shapes_kept(values, found.values):
                ran = self._run_past_site(a, values, run_deltas, outcome.step, found.weights)
                if ran is None or ran[1] is not None:
                    # one batch row broke the code after the site (labels of the whole batch): a
                    # fixed program would fail there on the witness, so the reproducer keeps the batch
                    values = found.values
            ev = runner.evaluate(values, run_deltas or None, grad=False, weights=found.weights)
            if ev.outcome is not None and ev.outcome.found:  # ev.found, spelled so the checker narrows
                outcome = ev.outcome
                values = {k: values[k] for k in ev.used if k in values} or values
            else:
                values = found.values
        except RunTimeout:
            values = found.values
        bounds = {
            k: settings.bound_factor * max(1.0, float(a.examples[k].abs().max()))
            for k in _measured_inputs(values, a.examples)
        }
        # A free parameter (free logits: a tensor the program made trainable that no optimizer
        # holds) is a weight here, not an input: the witness says how far it moved, with the weights.
        beyond = _beyond_examples(values, a.examples)
        moved = {}
        deltas = {}
        for k, d in found.deltas.items():
            m = float(d.abs().max()) if d.numel() else 0.0
            if m > 0:
                moved[found.param_names.get(k, k)] = m
                if k in run_deltas:
                    deltas[k] = to_value(d)
        # What the search changed explains the failure: first, where a text shows a few.
        values = {k: values[k] for k in changed_first(values, a.examples)}
        names = {k: input_name(k, a.program) for k in values}
        witness = Witness(
            entry=a.program.label,
            inputs={k: to_value(v) for k, v in values.items()},
            names={k: name for k, name in names.items() if name != k},
            weights_moved=moved,
            operand=to_value(outcome.operand) if outcome.operand is not None else None,
            result=outcome.result,
            phase=outcome.phase,
            iterations=found.iterations,
            seconds=round(found.seconds, 4),
            seed=self.seed,
            input_bound=max(bounds.values()) if bounds else None,
            beyond_examples=round(beyond, 4) if bounds else None,
            weight_deltas=deltas,
            weight_values={k: to_value(w) for k, w in found.weights.items()},
            steps=steps if steps is not None else (target_step or None),
            target_step=target_step,
            at_step=outcome.step,
            argv=list(a.program.argv),
        )
        return witness, message(site, outcome, values, a.program, names, moved, witness.steps)


PROBE_WORDS = "probe (synthesized inputs)"


class CallerDomains:
    """The domain of each tensor argument real callers pass to the target file's functions:
    non-negative, integer-valued (Poisson counts, lengths). Seen by a profile hook during the
    real entries' recording runs; tensors are kept (first calls only) and measured afterwards,
    outside the tracer, so that measuring them is no torch call of the program."""

    KEEP = 8  # calls per function

    def __init__(self, target: str) -> None:
        self.target = target
        self.seen: dict[str, dict[str, list[torch.Tensor]]] = {}

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        def hook(frame: Any, event: str, arg: Any) -> None:
            if event != "call" or frame.f_code.co_filename != self.target:
                return
            code = frame.f_code
            calls = self.seen.setdefault(code.co_qualname, {})  # "f", or "Model.forward" for a module
            for name in code.co_varnames[: code.co_argcount]:
                v = frame.f_locals.get(name)
                if isinstance(v, torch.Tensor) and len(calls.setdefault(name, [])) < self.KEEP:
                    calls[name].append(v)

        old = sys.getprofile()
        sys.setprofile(hook)
        try:
            yield
        finally:
            sys.setprofile(old)

    def supports(self, function: str) -> dict[str, str]:
        """Argument name -> the SUPPORTS name every real call of ``function`` stayed in;
        ``function`` is a probe's function or module class (its ``forward`` is what callers call)."""
        out = {}
        for name, seen in {**self.seen.get(f"{function}.forward", {}), **self.seen.get(function, {})}.items():
            real = [t for t in seen if torch.is_floating_point(t) and t.numel()]
            if not real:
                continue
            nonneg = all(bool((t >= 0).all()) for t in real)
            whole = all(bool((t == t.round()).all()) for t in real)
            if nonneg and whole:
                out[name] = "non-negative whole numbers"
            elif nonneg:
                out[name] = "non-negative"
            elif whole:
                out[name] = "whole numbers"
        return out


def input_name(key: str, program: E.Program) -> str:
    """Readable name of an input: the variable a factory's result was assigned to, or that held a
    tensor made outside torch where torch first saw it, when there is one."""
    if key in program.input_names:
        return program.input_names[key]
    m = FACTORY_KEY.fullmatch(key)
    if not m:
        return key
    for path, text in list(program.texts.items()) + [(f, None) for f in program.user_files]:
        if os.path.basename(path) != m.group(1):
            continue
        if text is None:
            try:
                text = open(path, encoding="utf-8").read()
            except OSError:
                continue
        lines = text.splitlines()
        n = int(m.group(2))
        if 1 <= n <= len(lines):
            line = lines[n - 1]
            occ = int(m.group(4))
            a = re.match(r"\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=[^=]", line)
            call_of_factory = re.compile(rf"\b{re.escape(m.group(3).rpartition('.')[2])}\s*\(")
            call = call_of_factory.search(line)
            # The assigned name is the input's only when the factory is not an argument of some
            # other call (``loss = Dice()(torch.randn(5, 3), ...)`` names the loss, not the input).
            if a and call and _call_depth(line[a.end() : call.start()]) == 0:
                return a.group(1) + (f" (#{occ + 1})" if occ else "")
            # `s, t = torch.randn(8), torch.randn(8) * 3`: the k-th call feeds the k-th name.
            t = re.match(r"\s*\(?\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*\)?\s*=[^=]", line)
            if t:
                names = [x.strip() for x in t.group(1).split(",")]
                calls = len(call_of_factory.findall(line.split("=", 1)[1]))
                if calls == len(names):
                    return names[occ % calls]
        break
    if m.group(3) == "operand":  # a tensor made outside torch, no variable found holding it
        return f"a tensor first used at line {m.group(2)}"
    return f"{m.group(3)}(...) at line {m.group(2)}"


def _call_depth(text: str) -> int:
    """How many call parentheses ``text`` leaves open (``f(`` counts, a grouping ``(`` does not)."""
    stack: list[bool] = []
    prev = ""
    for c in text:
        if c in "([{":
            stack.append(c == "(" and (prev.isalnum() or prev in "_)]"))
        elif c in ")]}" and stack:
            stack.pop()
        if not c.isspace():
            prev = c
    return sum(stack)


def message(
    site: Site,
    outcome: SiteOutcome,
    values: dict[str, Any],
    program: E.Program,
    names: dict[str, str],
    moved: dict[str, float],
    steps: int | None = None,
) -> str:
    """'torch.log receives 0 when x = [[...]]: -inf', in words people read; ``values`` come in
    the order they are named (``changed_first``), and ``names`` maps an input key to its readable
    name (``input_name``, worked out once per witness)."""
    region = KINDS[site.kind].region
    if region.matrix is not None and outcome.operand is not None:
        got = (
            f"a matrix of shape {list(outcome.operand.shape)} with "
            f"{_spectrum_words(region, outcome.operand, site)}"
        )
    elif region.shape is not None and outcome.operand is not None:
        got = f"a tensor of shape {list(outcome.operand.shape)} ({region.text})"
    elif outcome.bad_value is not None:
        b = float(outcome.bad_value)
        got = str(int(b)) if b.is_integer() and abs(b) < 1e15 else f"{b:.4g}"
    elif outcome.operand is not None:
        got = describe(outcome.operand)
    else:
        got = "its operand"

    shown = [f"{names.get(k, k)} = {describe(v)}" for k, v in list(values.items())[:3]]
    when = " when " + ", ".join(shown) if shown else ""
    top = ", ".join(f"{n} by up to {d:.3g}" for n, d in sorted(moved.items(), key=lambda kv: -kv[1])[:2])
    if steps is not None:
        # The program's own optimizer moved these weights: reachable by definition, not bounded.
        when += f" after {counted(steps, 'training step')}" + (
            f" (weights as training left them: {top})" if top else ""
        )
    elif moved:
        when += f" and weights moved ({top})"
    what = (
        f"its gradient is {outcome.result} in the backward pass"
        + (f", through the value {site.discarded_by} discards" if site.discarded_by else "")
        if outcome.phase == "backward"
        else f"raises {outcome.result}: {str(outcome.raised).split(chr(10))[0]}"
        if outcome.raised is not None
        else outcome.result
    )
    # A person must see that no caller of the file passed these inputs.
    how = f", found by a {PROBE_WORDS}" if isinstance(program, E.ProbeProgram) else ""
    return f"{site.op} receives {got}{when}: {what}{how}"


def changed_first(values: dict[str, Any], examples: dict[str, Any] | None) -> list[str]:
    """The keys of ``values``, those the search changed most from ``examples`` first: they
    explain the failure (one item of a batch moved far, the others rounded)."""

    def change(k: str) -> float:
        a, b = values[k], (examples or {}).get(k)
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape:
                return math.inf
            if not a.numel() or torch.equal(a, b):
                return 0.0
            gap = float((a.double() - b.double()).abs().max())
            return gap if gap == gap else math.inf
        return math.inf if a != b else 0.0

    return sorted(values, key=lambda k: -change(k))


def _spectrum_words(region: Region, operand: torch.Tensor, site: Site) -> str:
    """'det(A) = -0.25' / 'smallest eigenvalue -0.5' / 'smallest singular value 0' / 'eigenvalues
    1, 1, 3 (a gap of 0)': the matrix property the region is about."""
    try:
        a = operand.detach().double()
        if region.matrix == "repeated spectrum":
            found = row(site.op, site.kind)
            hermitian = found is not None and found.hermitian
            values = torch.linalg.eigvalsh(a) if hermitian else torch.linalg.svdvals(a)
            shown = ", ".join(f"{float(v):.4g}" for v in values.reshape(-1, values.shape[-1])[0][:6])
            gap = float(region.distance(a, hermitian=hermitian))
            return f"{'eigenvalues' if hermitian else 'singular values'} {shown} (a gap of {gap:.3g})"
        if region.matrix == "det <= 0":
            return f"det(A) = {float(torch.linalg.det(a).flatten().min()):.4g}"
        if region.matrix == "singular":
            return f"smallest singular value {float(torch.linalg.svdvals(a)[..., -1].min()):.4g}"
        return f"smallest eigenvalue {float(torch.linalg.eigvalsh(a)[..., 0].min()):.4g}"
    except RuntimeError:
        return region.text


def _entry_texts(req: dict) -> list[str]:
    """The other files the program runs through (``via``, explicit entries), for ``skip_dynamo_import``.
    Tests and importing scripts found later are not read: one of them that compiles meets the
    stand-in, which loads the real module on any use but the optimizer's two calls."""
    texts = []
    for f in [req.get("via"), *[e.rpartition(":")[0] for e in req.get("entries") or []]]:
        if f:
            try:
                with open(f, encoding="utf-8") as fh:
                    texts.append(fh.read())
            except (OSError, UnicodeDecodeError):
                texts.append("compile")  # unknown: keep the real module
    return texts


def main() -> int:
    faulthandler.enable(file=sys.stderr, all_threads=False)
    from .executors.child import open_child_channel

    result = open_child_channel()
    req = json.load(sys.stdin)
    skip_dynamo_import([req["text"], *_entry_texts(req)])
    stand_in_for_absent_packages()
    E.add_import_dirs(req["path"], E.project_root_for(req["path"], req.get("project_root")))
    sys.meta_path.insert(0, E.TextFinder(os.path.abspath(req["path"]), req["text"]))

    def out(msg: Message) -> None:
        result.write(protocol.line(msg))
        result.flush()

    Worker(req, out).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
