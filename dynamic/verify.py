"""Re-check proposed fixes: apply each to a copy of the text, re-run static + engine + replay.

``fix_verdicts`` is the only place a ``Fix`` becomes ``verified``; ``apply_edits`` is the one
helper every caller (CLI ``--fix``, server, tests) uses to turn edits into text.

A fix of a *confirmed* site is verified when, on the fixed text, (1) the static pass no longer
reports a candidate of that kind there or the engine's fresh search (same seed; five times the
seconds the original search needed, at least one, at most the budget) fails to confirm one, (2) the engine confirms no site that was not confirmed before, (3) the
original witness, replayed against the fixed text, no longer produces NaN/INF, and (4) the
program, run on its own example inputs, still completes and returns the same values within a
tolerance (where the entry returns something to compare). User code only runs in subprocesses:
the engine's workers, and ``python -m grist_lsp.dynamic.verify`` for replay and output runs.
Fixes of *possible* sites are proposed unverified; the static pass is still re-run on them
(cheap) and the note says whether it now proves the site safe.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import io
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grist_lsp.edits import EditError, apply_edits
from grist_lsp.edits import line_starts as _line_starts
from grist_lsp.edits import offset as _offset
from grist_lsp.model import (
    Fix,
    Site,
    Span,
    Status,
    TextEdit,
    Verdict,
    Witness,
)

from . import protocol
from .budget import seconds_of_runs
from .protocol import Done, Message, ReplayTask, RunTask, Task, TaskResult, decode_task, task_line

if TYPE_CHECKING:  # for annotations only: the replay child (``python -m ...verify``) never loads the engine
    from grist_lsp.dynamic.executors.child import Subprocess
    from grist_lsp.dynamic.executors.forkserver import ForkServer, ForkServers
    from grist_lsp.dynamic.options import EngineOptions

VERIFY_MODULE = "grist_lsp.dynamic.verify"

# Output comparison: relative and absolute tolerance. Clamps at 1e-8 and the like move values
# that were already far from the invalid region by far less than this.
RTOL = 1e-4
ATOL = 1e-6
# A site that ran in float16: its fix (an upcast) computes what float16 rounded, so the outputs
# may move by float16's own rounding error (machine epsilon ~1e-3, grown by a sum's length).
RTOL_FLOAT16 = 1e-2


def output_rtol(site_dtype: str | None) -> float:
    """How far a fix may move the program's outputs, for a site that ran in ``site_dtype``."""
    return RTOL_FLOAT16 if site_dtype == "float16" else RTOL


DEFAULT_TIMEOUT = 120.0
FIX_SEARCH_FACTOR = 5.0  # a fix's fresh search: this many times the runs the original search took
FIX_SEARCH_FLOOR = 1.0  # ... and at least this many seconds of budget (``budget.runs_for``)
STARTUP_ALLOWANCE = 60.0
MAX_PRINTED_NUMBERS = 10000
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b")


def shift_span(span: Span, edits: list[TextEdit], text: str) -> Span | None:
    """Where ``span`` of the original text lies after ``edits``; None if an edit overlaps it."""
    starts = _line_starts(text)
    lo = _offset(starts, text, span.start_line, span.start_col)
    hi = _offset(starts, text, span.end_line, span.end_col)
    delta_lo = delta_hi = 0
    for edit in edits:
        e_lo = _offset(starts, text, edit.span.start_line, edit.span.start_col)
        e_hi = _offset(starts, text, edit.span.end_line, edit.span.end_col)
        change = len(edit.new_text) - (e_hi - e_lo)
        if e_hi <= lo:
            delta_lo += change
            delta_hi += change
        elif e_lo >= hi:
            continue
        else:
            return None
    new_text = apply_edits(text, edits)
    return _span_of(new_text, lo + delta_lo, hi + delta_hi)


def _span_of(text: str, lo: int, hi: int) -> Span:
    starts = _line_starts(text)

    def pos(offset: int) -> tuple[int, int]:
        import bisect

        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1]

    (l1, c1), (l2, c2) = pos(lo), pos(hi)
    return Span(l1, c1, l2, c2)


# --- fix_verdicts ---------------------------------------------------------------------


@dataclass
class _Check:
    """What re-checking one fix found; ``note`` renders it in words."""

    parses: bool = True
    static_at_site: str = "unknown"  # "gone", "safe", "possible", "error: ..."
    engine_at_site: str = "not run"  # "not confirmed", "confirmed", "error: ..."
    new_confirmed: list[str] = field(default_factory=list)
    preexisting: list[str] = field(default_factory=list)  # newly found, but failing before the fix too
    moved_downstream: list[str] = field(default_factory=list)  # fails now where the original failed earlier
    replay: str = "not run"  # "not reproduced", "reproduced", "error: ..."
    output: str = "not compared"  # "same", "differs: ...", "no values", "error: ..."

    @property
    def verified(self) -> bool:
        bug_gone = (
            self.static_at_site in ("gone", "safe") or self.engine_at_site == "not confirmed"
        ) and self.engine_at_site != "confirmed again"
        return (
            self.parses
            and bug_gone
            and not self.new_confirmed
            and not self.moved_downstream
            and self.replay == "not reproduced"
            and not self.output.startswith(("differs", "error"))
        )

    def note(self, no_witness: bool = False) -> str:
        if not self.parses:
            return "not verified: the rewritten file does not parse"
        parts = []
        parts.append(
            {
                "gone": "static pass: no such op at the site any more",
                "safe": "static pass: the site is now proved safe",
                "possible": "static pass: the site is still a candidate",
            }.get(self.static_at_site, f"static pass: {self.static_at_site}")
        )
        if self.engine_at_site != "not run":
            parts.append(f"engine (fresh search, same seed): the site is {self.engine_at_site}")
        if self.new_confirmed:
            parts.append("engine confirmed new bugs at " + ", ".join(self.new_confirmed))
        if self.moved_downstream:
            parts.append(
                "the failure moves downstream to "
                + ", ".join(self.moved_downstream)
                + " (on those inputs the original already failed earlier)"
            )
        if not self.new_confirmed and not self.moved_downstream and self.engine_at_site != "not run":
            parts.append("no new confirmed site")
        if self.preexisting:
            parts.append(
                "also confirmed, but failing the same way before the fix: " + ", ".join(self.preexisting)
            )
        if self.replay != "not run":
            parts.append(f"original witness replayed on the fixed code: {self.replay}")
        parts.append(
            {
                "same": f"program output on its example inputs unchanged (rtol {RTOL:g}, atol {ATOL:g})",
                "no values": "program runs on its example inputs (it returns and prints no values to compare)",
                "same printed": f"numbers the program prints on its example inputs unchanged (rtol {RTOL:g})",
                "not compared": "program output not compared",
            }.get(self.output, f"program output on its example inputs: {self.output}")
        )
        if no_witness:
            return "not verified (no witness to re-run): " + "; ".join(parts[:1])
        return ("verified: " if self.verified else "not verified: ") + "; ".join(parts)


def fix_verdicts(
    path: str,
    text: str,
    verdicts: list[Verdict],
    options: EngineOptions,
    shared: SharedChild | None = None,
    only: Collection[str] | None = None,
) -> list[Verdict]:
    """``verdicts`` with ``fixes`` filled in for confirmed and possible sites.

    ``options`` is the engine's ``EngineOptions`` (budget, seed, timeout ... reused for the
    re-check, reproducer writing switched off). Other verdicts pass through unchanged.
    ``shared``: a warm child the caller started (and closes) for these checks; else one is made here.
    ``only``: the site keys to fix (an editor checks a confirmation's fixes while the search goes
    on, then the rest); the others pass through unchanged. The whole list is still the context
    that tells a fix's new findings from the file's other sites.
    """
    from grist_lsp.analyzer.fixes import Fixer

    own = shared is None
    shared = shared if shared is not None else SharedChild(options, path)
    if any(v.status is Status.CONFIRMED and (only is None or v.site.key in only) for v in verdicts):
        shared.start()  # torch imports while the fixes are proposed
    try:
        originals = shared.originals
        fixer = Fixer(text)
        proposals: list[list[Fix]] = []
        out: list[Verdict] = []
        for verdict in verdicts:
            if (
                verdict.status not in (Status.CONFIRMED, Status.POSSIBLE)
                or verdict.site.kind == "error"
                or (only is not None and verdict.site.key not in only)
            ):
                proposals.append([])
                out.append(verdict)
                continue
            try:
                proposals.append(fixer.propose(verdict))
                out.append(verdict)
            except Exception as exc:  # a rewrite bug must not lose the finding
                proposals.append([])
                out.append(
                    dataclasses.replace(
                        verdict, reason=f"{verdict.reason} (no fix proposed: {type(exc).__name__}: {exc})"
                    )
                )
        # Each check is subprocesses (engine workers, replay, program runs): threads overlap them,
        # as many at once as the engine may use workers.
        jobs = max(1, options.jobs)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [
                [
                    pool.submit(check_fix, path, text, verdict, fix, verdicts, options, originals, shared)
                    for fix in fixes
                ]
                for verdict, fixes in zip(out, proposals)
            ]
            for i, pending in enumerate(futures):
                if pending:
                    checked = [f.result() for f in pending]
                    # verified fixes first: the CLI's --fix and the editor's preferred action take the first
                    checked.sort(key=lambda f: not f.verified)
                    out[i] = dataclasses.replace(out[i], fixes=checked)
    finally:
        if own:
            shared.close()
    return out


def check_fix(
    path: str,
    text: str,
    verdict: Verdict,
    fix: Fix,
    verdicts: list[Verdict],
    options: EngineOptions,
    originals: _Originals | None = None,
    shared: SharedChild | None = None,
) -> Fix:
    """``fix`` re-checked against ``verdict`` (see the module docstring for what "verified" means).

    ``originals`` caches the unfixed program's runs across the fixes of one file; ``shared`` is
    the file's warm child (one is made for this check when not given).
    """
    own = shared is None
    shared = shared if shared is not None else SharedChild(options, path)
    try:
        return _check_fix(
            path,
            text,
            verdict,
            fix,
            verdicts,
            options,
            originals if originals is not None else shared.originals,
            shared,
        )
    finally:
        if own:
            shared.close()


def _check_fix(
    path: str,
    text: str,
    verdict: Verdict,
    fix: Fix,
    verdicts: list[Verdict],
    options: EngineOptions,
    originals: _Originals,
    runs: SharedChild,
) -> Fix:
    check = _Check()
    try:
        fixed = apply_edits(text, fix.edits)
        compile(fixed, path, "exec", dont_inherit=True)
    except (EditError, SyntaxError, ValueError):
        check.parses = False
        return dataclasses.replace(fix, verified=False, note=check.note())
    region = edited_region(text, fix.edits, verdict.site.span)
    static = _static(path, fixed)
    check.static_at_site = _static_at(static, region, verdict.site.kind)
    if verdict.status is Status.CONFIRMED and verdict.witness is not None:
        # three independent looks, in the engine's workers and the warm child: overlap them
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            searched = pool.submit(
                _engine_check, check, path, text, fixed, verdict, fix, verdicts, static, region, options, runs
            )
            replayed = pool.submit(_replay, path, fixed, verdict, region, runs)
            compared = pool.submit(
                _compare_outputs,
                path,
                text,
                fixed,
                verdict.witness,
                runs,
                originals,
                output_rtol(verdict.site.dtype),
            )
            searched.result()
            check.replay, check.output = replayed.result(), compared.result()
        return dataclasses.replace(fix, verified=check.verified, note=check.note())
    return dataclasses.replace(fix, verified=False, note=check.note(no_witness=True))


def edited_region(text: str, edits: list[TextEdit], site_span: Span) -> Span:
    """The span, in the fixed text, of the code that replaced the site (or of the site itself)."""
    main = next((e for e in edits if _overlaps(e.span, site_span)), None)
    if main is None:
        moved = shift_span(site_span, edits, text)
        return moved if moved is not None else site_span
    others = [e for e in edits if e is not main]
    start = shift_span(
        Span(main.span.start_line, main.span.start_col, main.span.start_line, main.span.start_col),
        others,
        text,
    )
    assert start is not None
    lines = main.new_text.split("\n")
    end_line = start.start_line + len(lines) - 1
    end_col = (start.start_col if len(lines) == 1 else 0) + len(lines[-1])
    return Span(start.start_line, start.start_col, end_line, end_col)


def _overlaps(a: Span, b: Span) -> bool:
    a_lo, a_hi = (a.start_line, a.start_col), (a.end_line, a.end_col)
    b_lo, b_hi = (b.start_line, b.start_col), (b.end_line, b.end_col)
    return a_lo <= b_lo and b_hi <= a_hi or (a_lo < b_hi and b_lo < a_hi)


def _within(inner: Span, outer: Span) -> bool:
    return (outer.start_line, outer.start_col) <= (inner.start_line, inner.start_col) and (
        inner.end_line,
        inner.end_col,
    ) <= (outer.end_line, outer.end_col)


def _static(path: str, text: str) -> list[Verdict]:
    from grist_lsp.analyzer.analysis import analyze_source

    return analyze_source(path, text)


def _static_at(static: list[Verdict], region: Span, kind: str) -> str:
    errors = [v for v in static if v.status is Status.ERROR]
    if errors:
        return f"error: {errors[0].reason}"
    here = [v for v in static if v.site.kind == kind and _within(v.site.span, region)]
    if not here:
        return "gone"
    return "possible" if any(v.status is not Status.SAFE for v in here) else "safe"


def _engine_check(
    check: _Check,
    path: str,
    text: str,
    fixed: str,
    verdict: Verdict,
    fix: Fix,
    verdicts: list[Verdict],
    static: list[Verdict],
    region: Span,
    options: EngineOptions,
    runs: SharedChild,
) -> None:
    """Fresh engine search on the fixed text: the site, and any site not confirmed before."""
    from grist_lsp.dynamic.engine import confirm

    if any(v.status is Status.ERROR for v in static):
        check.engine_at_site = "error: the static pass failed on the fixed text"
        return
    # The search that found the bug took the witness's runs: a fresh search of the fixed site gets
    # several times that (at least a second's worth), not a whole budget per fix. Runs, not the
    # witness's seconds, so that a fix is verified the same way under any load.
    found_in = seconds_of_runs(verdict.witness.iterations) if verdict.witness is not None else options.budget
    budget = min(options.budget, max(FIX_SEARCH_FLOOR, FIX_SEARCH_FACTOR * found_in))
    opts = dataclasses.replace(options, write_reproducers=None, budget=budget)
    before = _keys_before(text, fix, verdicts, verdict, Status.CONFIRMED)
    searched = _keys_before(text, fix, verdicts, verdict, Status.POSSIBLE)
    # Sites confirmed before the fix stay bugs either way, and the other open sites were searched
    # with the same budget and seed already: searching them again costs budget and says little
    # about this fix, so they go to the engine as settled. What is searched is the fix's own site
    # (when the static pass cannot prove it now) and any site the fix's code added.
    todo = [
        v
        if not (
            v.status is Status.POSSIBLE
            and (
                _settled(v.site, before, region, verdict.site.kind)
                or _settled(v.site, searched, region, verdict.site.kind)
            )
        )
        else dataclasses.replace(v, status=Status.SAFE, reason="settled before the fix")
        for v in static
    ]
    try:
        # In the file's warm child and from its server: the fresh search starts no torch of its own.
        result = confirm(path, fixed, todo, opts, warm=runs)
    except Exception as exc:  # the engine reports run errors as verdicts; anything else is ours to say
        check.engine_at_site = f"error: {type(exc).__name__}: {exc}"
        return
    run_errors = [v for v in result if v.status is Status.ERROR]
    at_site = False
    for v in result:
        if v.status is not Status.CONFIRMED:
            continue
        if v.site.kind == verdict.site.kind and _within(v.site.span, region):
            at_site = True
        elif not _settled(v.site, before, region, verdict.site.kind):
            where = f"line {v.site.span.start_line} ({v.site.op or v.site.kind})"
            before_fix = _before_the_fix(path, text, fixed, fix, v, runs)
            if before_fix == "same":
                # the fresh search found a bug the first search missed (budget): not the fix's doing
                check.preexisting.append(where)
            elif before_fix == "upstream":
                check.moved_downstream.append(where)
            else:
                check.new_confirmed.append(where)
    if at_site:
        check.engine_at_site = "confirmed again"
    elif run_errors and not any(v.status is Status.CONFIRMED for v in result):
        check.engine_at_site = f"error: {run_errors[0].reason}"
    else:
        check.engine_at_site = "not confirmed"


def _before_the_fix(path: str, text: str, fixed: str, fix: Fix, found: Verdict, runs: SharedChild) -> str:
    """What the witness of a site confirmed on the fixed text does to the original text:
    "same" (that site fails there too), "upstream" (the original already failed earlier on these
    inputs, so the fix moves the failure downstream) or "new"."""
    original_span = shift_span(found.site.span, inverse_edits(text, fix.edits), fixed)
    if original_span is None or found.witness is None:
        return "new"  # the site is part of the fix's own code
    site = dataclasses.replace(found.site, span=original_span)
    res = runs.run(ReplayTask(path, text, site, found.witness))
    if res.get("reproduced"):
        return "same"
    return "upstream" if "upstream" in str(res.get("detail", "")) else "new"


def inverse_edits(text: str, edits: list[TextEdit]) -> list[TextEdit]:
    """Edits on ``apply_edits(text, edits)`` that give ``text`` back (to map positions back)."""
    starts = _line_starts(text)
    ranges = sorted(
        (
            _offset(starts, text, e.span.start_line, e.span.start_col),
            _offset(starts, text, e.span.end_line, e.span.end_col),
            i,
            e.new_text,
        )
        for i, e in enumerate(edits)
    )
    fixed = apply_edits(text, edits)
    out, delta = [], 0
    for lo, hi, _, new_text in ranges:
        new_lo = lo + delta
        span = _span_of(fixed, new_lo, new_lo + len(new_text))
        out.append(TextEdit(span, text[lo:hi]))
        delta += len(new_text) - (hi - lo)
    return out


def _key(site: Site) -> tuple[int, int, str]:
    return site.span.start_line, site.span.start_col, site.kind


def _keys_before(
    text: str, fix: Fix, verdicts: list[Verdict], verdict: Verdict, status: Status
) -> set[tuple[int, int | None, str]]:
    """Keys, in the fixed text, of the other sites that had ``status`` before the fix. A site the
    fix's edits reach into (``exp(x) / y`` when ``exp`` is clamped) keeps its line when the edits
    add no line break: it is keyed by line and kind, its column left open (None)."""
    keys: set[tuple[int, int | None, str]] = set()
    single_line = all("\n" not in e.new_text and e.span.start_line == e.span.end_line for e in fix.edits)
    for v in verdicts:
        if v.status is status and v is not verdict:
            moved = shift_span(v.site.span, fix.edits, text)
            if moved is not None:
                keys.add((moved.start_line, moved.start_col, v.site.kind))
            elif single_line:
                keys.add((v.site.span.start_line, None, v.site.kind))
    return keys


def _settled(site: Site, keys: set[tuple[int, int | None, str]], region: Span, kind: str) -> bool:
    """Whether ``site`` of the fixed text is one of ``keys``, not the fix's own site (of ``kind``
    in the edited ``region``); ``sim / tau`` inside a clamped ``exp(sim / tau)`` is still itself."""
    if _key(site) in keys:
        return True
    own = site.kind == kind and _within(site.span, region)
    return (site.span.start_line, None, site.kind) in keys and not own


# --- subprocess work: replay and output runs ------------------------------------------------


class SharedChild:
    """One warm ``python -m grist_lsp.dynamic.verify`` child for all of a file's fix checks, and
    the fork server (``forkserver.py``) every other child of the file is forked from: the
    check's, shared with its other files (``servers``), or the file's own.

    Every fix check needs a few short runs (a replay, the program on its own inputs); a child
    apiece pays torch's start-up each time, which is most of a fix check. This one is started
    once, fed tasks as JSON lines and answers them in order; a task that overruns its time
    kills it, and the next task starts a fresh one. ``child`` makes the engine's workers (the
    search, and each fix's fresh search) from the same server, so a file imports torch once.
    ``writable``: the folder run outputs go to (inside the servers' folder).
    """

    def __init__(self, options: EngineOptions, path: str, servers: ForkServers | None = None) -> None:
        from grist_lsp.dynamic.executors.child import worker_env
        from grist_lsp.dynamic.executors.forkserver import ForkServers

        self.options, self.path = options, path
        # The check's servers, or this file's own (closed with it).
        self.servers, self._own_servers = servers or ForkServers(worker_env), servers is None
        # Run outputs; removed by close(). The servers' children may write their folder only.
        self.writable = tempfile.mkdtemp(prefix="grist-verify-", dir=self.servers.writable)
        # The unfixed program's own runs, shared by every fix check of this child (those of a
        # confirmation checked early, while the search goes on, and the rest after it).
        self.originals = _Originals(self.writable)
        self._lock = threading.Lock()  # one task at a time: the child answers in order
        self._child: Any = None
        self._answers: dict[int, dict[str, Any]] = {}
        self._arrived = threading.Condition()
        self._ids = 0
        self._server: ForkServer | None = None
        # The child is started from a thread of its own that lives until ``close``: the sandbox
        # ties the child's life to the thread that started it (a parent-death signal), and the
        # callers' threads (a search's progress, a pool's) end before the child's work does.
        self._owner = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="grist-verify-child"
        )

    def _on_line(self, msg: Message) -> None:
        if isinstance(msg, TaskResult):
            with self._arrived:
                self._answers[msg.id] = msg.result
                self._arrived.notify_all()

    def _spawn(self) -> Any:
        child = self._new(VERIFY_MODULE)
        child.start(self._on_line)
        return child

    def _new(self, module: str) -> Subprocess:
        """A fresh child running ``module``, forked from the file's server (started on first use,
        in the owner thread); where there is none (not Linux), or it went away, a child started
        the usual way."""
        from grist_lsp.dynamic.executors import forkserver
        from grist_lsp.dynamic.executors.child import Subprocess, child_confinement

        confinement = child_confinement(self.options, self.path, (self.servers.writable,))
        if self._server is None and forkserver.available():
            self._server = self.servers.server(confinement)
        if self._server is not None:
            try:
                return Subprocess(module, self.options.memory_mb, server=self._server)
            except forkserver.ForkServerGone:
                pass
        return Subprocess(module, self.options.memory_mb, confinement)

    def child(self, module: str) -> Subprocess:
        """A fresh ``python -m module`` child of this file (the engine's search workers), made
        from the file's server: no torch start-up of its own. The caller finishes it."""
        return self._owner.submit(self._new, module).result()

    def _started(self) -> Any:
        if self._child is None:
            self._child = self._owner.submit(self._spawn).result()
        return self._child

    def start(self) -> None:
        """Start the child now, so torch imports while the caller does other work."""
        with self._lock:
            self._started()

    @property
    def timeout(self) -> float:
        """Per run: the engine's run timeout plus a margin (the child's torch start-up is timed
        apart from it)."""
        value = self.options.timeout
        return float(value) + STARTUP_ALLOWANCE if value else DEFAULT_TIMEOUT

    def run(self, task: Task, seconds: float | None = None) -> dict[str, Any]:
        """``task``'s answer, or ``{"error": ...}``; ``seconds`` defaults to ``timeout``."""
        seconds = self.timeout if seconds is None else seconds
        with self._lock:
            child = self._started()
            self._ids += 1
            ident = self._ids
            child.send_line(task_line(task, ident))
            sent = time.monotonic()
            # The clock starts when the task is sent, or once the child is ready if it is not yet
            # (torch start-up is timed apart, as for workers): never at the child's own start, or
            # a task sent long after it (a replay after a long search) would be out of time at once.
            with self._arrived:
                while ident not in self._answers:
                    ready = child.ready[0] if child.ready else None
                    if (
                        child.proc.poll() is not None
                        or (ready is not None and time.monotonic() > max(ready, sent) + seconds)
                        or time.monotonic() > sent + seconds + STARTUP_ALLOWANCE
                    ):
                        break
                    self._arrived.wait(0.05)
                answer = self._answers.pop(ident, None)
            if answer is None:
                timed_out = child.proc.poll() is None
                tail = self._discard()
                return {"error": f"timed out after {seconds:g} s" if timed_out else f"worker exited: {tail}"}
            return answer

    def _discard(self) -> str:
        child, self._child = self._child, None
        if child is None:
            return ""
        res = child.finish(0.0)
        return (res.stderr.strip().splitlines() or ["no output"])[-1]

    def close(self, used: bool = True) -> None:
        """End the child: let a child that ran tasks exit by itself (a few seconds at most); kill
        one that never ran any, which may still be importing torch for seconds."""
        with self._lock:
            if self._child is not None:
                if used:
                    self._child.finish(5.0)
                else:
                    self._child.discard()
                self._child = None
            self._server = None
        self._owner.shutdown(wait=False)
        shutil.rmtree(self.writable, ignore_errors=True)
        if self._own_servers:  # a shared one is the check's, closed after its last file
            self.servers.close()


def _replay(path: str, fixed: str, verdict: Verdict, region: Span, runs: SharedChild) -> str:
    site = dataclasses.replace(verdict.site, span=region)
    assert verdict.witness is not None  # only confirmed verdicts are replayed
    res = runs.run(ReplayTask(path, fixed, site, verdict.witness))
    if "error" in res:
        return f"error: {res['error']}"
    return "reproduced" if res["reproduced"] else "not reproduced"


@dataclass
class _Originals:
    """Runs of the unfixed program on its example inputs, one per (text, entry, seed), kept on disk."""

    directory: str  # a folder the warm child may write (``SharedChild.writable``)
    runs: dict[tuple[str, str, int], tuple[dict[str, Any], str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, path: str, text: str, witness: Witness, runs: SharedChild) -> tuple[dict[str, Any], str]:
        key = (text, witness.entry, witness.seed)
        with self.lock:  # one run per entry even when two fixes ask at once
            if key not in self.runs:
                out_file = os.path.join(self.directory, f"original-{len(self.runs)}.pt")
                res = runs.run(
                    RunTask(path, text, witness.entry, witness.seed, out_file, argv=list(witness.argv))
                )
                self.runs[key] = (res, out_file)
            return self.runs[key]


def _compare_outputs(
    path: str, text: str, fixed: str, witness: Witness, runs: SharedChild, originals: _Originals, rtol: float
) -> str:
    """Run the program on its example inputs, original then fixed, and compare what it returns."""
    orig, orig_file = originals.get(path, text, witness, runs)
    # Beside the original's output: the one folder a shared child may write.
    with tempfile.TemporaryDirectory(prefix="fixed-", dir=os.path.dirname(orig_file)) as tmp:
        new_file = os.path.join(tmp, "fixed.pt")
        # The child compares the two runs' values itself: torch stays out of this process.
        compare_with = orig_file if "error" not in orig and orig.get("values") else None
        new = runs.run(
            RunTask(
                path, fixed, witness.entry, witness.seed, new_file, compare_with, rtol, list(witness.argv)
            )
        )
        if "error" in orig:
            return "not compared"  # the original does not run on its own inputs: nothing to preserve
        if "error" in new:
            return f"error: the fixed program fails: {new['error']}"
        if orig.get("raised") != new.get("raised"):
            return f"differs: the original {orig.get('raised') or 'returned'}, the fix {new.get('raised') or 'returned'}"
        if not orig.get("values"):
            return _same_printed(orig.get("printed") or [], new.get("printed") or [], rtol)
        return str(new.get("compared") or "error: the values were not compared")


def _same_printed(before: list[float], after: list[float], rtol: float = RTOL) -> str:
    """Compare the numbers a program printed (scripts return nothing else to compare)."""
    if not before and not after:
        return "no values"
    if len(before) != len(after):
        return f"differs: it printed {len(before)} numbers before, {len(after)} after"
    for i, (x, y) in enumerate(zip(before, after)):
        if math.isfinite(x) and not math.isclose(x, y, rel_tol=rtol, abs_tol=ATOL):
            return f"differs: printed number {i + 1} was {x:g}, now {y:g}"
    return "same printed"


def _same(a: list, b: list, rtol: float = RTOL) -> str:
    import torch

    if len(a) != len(b):
        return f"differs: {len(a)} values returned before, {len(b)} after"
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return f"differs: value {i} has shape {list(x.shape)} before, {list(y.shape)} after"
        if not (x.is_floating_point() or x.is_complex()):
            if not torch.equal(x, y):
                return f"differs: value {i} changed"
            continue
        x, y = x.double(), y.double()
        # a non-finite value before the fix is the bug itself, not behaviour to preserve
        keep = torch.isfinite(x)
        if not torch.allclose(x[keep], y[keep], rtol=rtol, atol=ATOL):
            worst = (x[keep] - y[keep]).abs().max().item()
            return f"differs: value {i} moved by up to {worst:.3g}"
    return "same"


def _flatten(value: Any, out: list) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        out.append(value.detach().cpu())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(torch.tensor(float(value), dtype=torch.float64))
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            _flatten(value[k], out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _flatten(v, out)


def _worker_main() -> None:
    """Entry of ``python -m grist_lsp.dynamic.verify``: JSON tasks on stdin, one a line, each
    answered by a result line (with the task's ``id``) on the engine's result pipe, in order
    (limits and sandbox applied by ``open_child_channel``). A one-off run sends one task; a
    ``SharedChild`` keeps the child warm for all of a file's fix checks."""
    from grist_lsp.dynamic.executors.child import open_child_channel

    channel = open_child_channel()
    for line in sys.stdin:
        if not line.strip():
            continue
        ident, task = decode_task(line)
        try:
            result = _task(task)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
            result = {"error": f"{type(exc).__name__}: {exc}"}
        channel.write(protocol.line(TaskResult(ident, result)))
        channel.flush()
    channel.write(protocol.line(Done()))
    channel.flush()


def _task(task: Task) -> dict[str, Any]:
    from grist_lsp.dynamic.absent_torchvision import stand_in_for_absent_packages
    from grist_lsp.dynamic.lazy_dynamo import skip_dynamo_import

    skip_dynamo_import([task.text])
    stand_in_for_absent_packages()
    if isinstance(task, ReplayTask):
        from grist_lsp.dynamic.replay import replay

        res = replay(task.site, task.witness, text=task.text)
        return {"reproduced": bool(res.reproduced), "detail": str(res.detail), "result": res.result}
    from grist_lsp.dynamic import entries

    # ``import <the target module>`` (by the entry file or a test) must run ``text``, not the file
    # on disk: the fixed text only exists here; what the run imports is dropped afterwards.
    with entries.program_imports(task.path, task.text):
        return _run_program(task)


TRAINING_STEPS_COMPARED = 20
# A program that does not train may loop for ever too (an evaluation loop that stops only on a NaN
# it never meets once fixed): it is compared on its first scalar results (each step's metric, and
# the few other scalars a step makes: about as many steps as a training program's twenty). More
# costs the check seconds on an endless loop (two runs of it, the original's and the fix's).
SCALARS_COMPARED = 100


def _loss_watch_class() -> type:
    """A TorchFunctionMode class made on first use, so that importing this module never imports torch."""
    import torch
    from torch.overrides import TorchFunctionMode, resolve_name

    class Watch(TorchFunctionMode):
        """Records, for ``limit`` values, the tensor each ``backward`` is called on (``trains``) or
        else each floating scalar a torch call returns, and stops the run there."""

        class Enough(BaseException):
            """Enough values seen: the run stops here."""

        def __init__(self, limit: int, trains: bool) -> None:
            super().__init__()
            self.limit = limit
            self.trains = trains
            self.values: list[Any] = []
            self.cut = False

        def __torch_function__(
            self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
        ) -> Any:
            backward = resolve_name(func) in ("torch.Tensor.backward", "torch.autograd.backward")
            if self.trains and backward and args:
                self.values.append(args[0].detach().clone())
            out = func(*args, **(kwargs or {}))
            if (
                not self.trains
                and isinstance(out, torch.Tensor)
                and out.dim() == 0
                and torch.is_floating_point(out)
            ):
                self.values.append(out.detach().clone())
            if len(self.values) >= self.limit:
                self.cut = True
                raise Watch.Enough()
            return out

    return Watch


def _run_program(task: RunTask) -> dict[str, Any]:
    """Run the witness's entry once on the program's own inputs (no substitution) and save what
    it returns as a flat list of tensors."""
    import torch

    from grist_lsp.dynamic import entries

    label, path, text, seed = task.entry, task.path, task.text, task.seed
    kind = label.partition(":")[0]
    if kind == "probe":
        programs = [p for p in entries.probe_programs(path, text, seed) if p.label == label]
        if not programs:
            return {"error": f"the probe {label} no longer exists"}
        program: Any = programs[0]
    else:
        program = entries.program_from_label(label, path, text, seed, argv=task.argv)
    program.setup()
    entries.seed_everything(seed)
    call, named = program.prepare()
    args, kwargs = entries.split_arguments(named)
    raised = None
    value = None
    printed = io.StringIO()
    # A program may loop for ever (``while True`` until the loss is NaN): what it does on its own
    # inputs is then its loss over the first steps (or its first scalar results, when it does not
    # train), which a fix must leave unchanged.
    loss_watch = _loss_watch_class()
    trains = program.trains
    losses = loss_watch(TRAINING_STEPS_COMPARED if trains else SCALARS_COMPARED, trains)
    try:
        with (
            torch.no_grad() if kind == "probe" else contextlib.nullcontext(),
            contextlib.redirect_stdout(printed),
            losses,
        ):
            value = call(*args, **kwargs)
    except loss_watch.Enough:
        pass
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raised = f"SystemExit({exc.code})"
    except Exception as exc:  # the program's own failure is behaviour to compare
        raised = type(exc).__name__
    flat: list = []
    _flatten(losses.values if trains or losses.cut else value, flat)
    torch.save(flat, task.out)
    # a script's output is what it prints: keep the numbers in it for comparison
    numbers = [float(m) for m in _NUMBER.findall(printed.getvalue())][:MAX_PRINTED_NUMBERS]
    result: dict[str, Any] = {"raised": raised, "values": len(flat), "printed": numbers}
    if task.compare_with:
        result["compared"] = _same(torch.load(task.compare_with, weights_only=True), flat, task.rtol)
    return result


if __name__ == "__main__":
    _worker_main()
