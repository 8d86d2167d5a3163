"""When analyses run: static on every change, dynamic debounced, cancellable and cached.

All scheduling happens on the server's asyncio loop; the work itself runs on three
private single-thread executors (static pass, engine run, fix re-checks) so a long
engine run never delays static diagnostics, and pygls' own thread pool (which reads
stdin) stays free. The engine runs one file at a time: the cores are shared with the
editor. Results are cached in memory by a hash of (path, text[, engine settings]), and on
disk in the project's result cache (``grist_lsp/cache.py``, shared with ``grist-lsp --check``),
which answers an engine run before anything starts ("Re-check" skips it once); a result is
shown only while it describes the document's current text, so a stale run can finish
but never overwrite newer diagnostics. While a re-check of an edited file is pending,
bugs confirmed on the previous text stay on their (moved) lines, marked as re-checking.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Hashable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from grist_lsp.model import Fix, Site, Span, Status, TextEdit, Verdict
from grist_lsp.server import core
from grist_lsp.server.diagnostics import witness_words
from grist_lsp.server.settings import Settings

if TYPE_CHECKING:
    from grist_lsp.server.server import GristServer

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class DaemonExecutor(Executor):
    """One daemon worker thread, first in first out.

    Not a ThreadPoolExecutor: the interpreter joins those at exit, and a fix re-check
    (``fix_verdicts`` takes no cancel event) could then hold the server's exit for
    tens of seconds after the editor said goodbye.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Any, tuple[Any, ...], dict[str, Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._queue.put(None)
        if wait:
            self._thread.join()


class LRU(Generic[K, V]):
    """A small bounded mapping; old texts fall out as the user types."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def drop(self, predicate: Any) -> int:
        doomed = [k for k in self._items if predicate(k)]
        for k in doomed:
            del self._items[k]
        return len(doomed)

    def __contains__(self, key: object) -> bool:
        return key in self._items


CARRIED_NOTE = " (found before your last edit; re-checking)"


def _identity(site: Site) -> tuple[str, str, str, str | None]:
    return (site.op, site.kind, site.text, site.function)


def _shift_fix(fix: Fix, old: Span, new: Span) -> Fix | None:
    """``fix`` moved along with its site, if every edit lies inside the site's one line."""
    if old.start_line != old.end_line or new.start_line != new.end_line:
        return None
    delta = new.start_col - old.start_col
    edits = []
    for edit in fix.edits:
        span = edit.span
        if not (
            span.start_line == span.end_line == old.start_line
            and old.start_col <= span.start_col
            and span.end_col <= old.end_col
        ):
            return None  # touches text outside the site (an import, another line): may not apply any more
        edits.append(
            TextEdit(
                Span(new.start_line, span.start_col + delta, new.start_line, span.end_col + delta),
                edit.new_text,
            )
        )
    return dataclasses.replace(fix, edits=edits)


def carry_over(static: list[Verdict], previous: list[Verdict]) -> list[Verdict]:
    """Static verdicts of a new text, with confirmations of the same sites in the previous text.

    While the engine re-checks an edited file, a bug it confirmed a moment ago should not
    fade to a warning because a comment changed. A site is "the same" when op, kind, source
    text and enclosing function match, n-th occurrence to n-th occurrence; its range is the
    new text's, and the message says it awaits the re-check.
    """
    confirmed: dict[tuple, list[Verdict]] = {}
    for verdict in sorted(previous, key=lambda v: v.site.span):
        if verdict.status is Status.CONFIRMED and verdict.witness is not None:
            confirmed.setdefault(_identity(verdict.site), []).append(verdict)
    seen: dict[tuple, int] = {}
    out = []
    for verdict in sorted(static, key=lambda v: v.site.span):
        identity = _identity(verdict.site)
        index = seen.get(identity, 0)
        seen[identity] = index + 1
        matches = confirmed.get(identity, [])
        if verdict.status is not Status.POSSIBLE or index >= len(matches):
            out.append(verdict)
            continue
        old = matches[index]
        assert old.witness is not None  # only verdicts with a witness were collected above
        words = old.message or witness_words(old, old.witness)
        fixes = [
            f for f in (_shift_fix(f, old.site.span, verdict.site.span) for f in old.fixes) if f is not None
        ]
        out.append(dataclasses.replace(old, site=verdict.site, fixes=fixes, message=words + CARRIED_NOTE))
    return out


def run_summary(path: str, static: list[Verdict], verdicts: list[Verdict], seconds: float) -> str:
    """The one log line of a finished engine run: file, sites checked, confirmed, seconds."""
    checked = sum(v.status is Status.POSSIBLE for v in static)
    confirmed = sum(v.status is Status.CONFIRMED for v in verdicts)
    errors = [v for v in verdicts if v.status is Status.ERROR]
    line = f"checked {path}: {checked} site{'s' * (checked != 1)}, {confirmed} confirmed, {seconds:.1f} s"
    if errors:
        line += f"; could not run: {errors[0].message or errors[0].reason}"
    return line


def text_hash(path: str, text: str) -> str:
    return hashlib.sha256(f"{path}\0{text}".encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass
class Snapshot:
    """One version of an open document, as the scheduler sees it."""

    uri: str
    path: str
    version: int | None
    text: str
    root: str | None
    can_run: bool  # a real file (not untitled:) the engine may run

    @functools.cached_property
    def hash(self) -> str:
        return text_hash(self.path, self.text)


@dataclass
class Run:
    """A dynamic run in flight for one document text."""

    uri: str
    key: tuple[Any, ...]
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None


class EarlyFixes:
    """The confirmations of one engine run that arrive before the run ends, and their fixes.

    Each confirmation is shown at once and its fixes are re-checked in the fix thread while the
    search goes on (the other sites count as searched: they are, by the same run); the run's
    answer is merged with what is known by then. Lives on the event loop's thread.
    """

    def __init__(self, scheduler: Scheduler, run: Run, snap: Snapshot, settings: Settings, warm: Any) -> None:
        self.scheduler, self.run, self.snap, self.settings, self.warm = scheduler, run, snap, settings, warm
        self.loop = asyncio.get_running_loop()
        base = scheduler.static_results.get(snap.hash) or []
        self.verdicts: list[Verdict] = list(base)  # static, with the confirmations so far
        self.fixed: dict[str, Verdict] = {}  # site key -> the confirmation with its checked fixes
        self.keys: set[str] = set()  # sites whose fixes are being (or were) checked early
        self.pending: list[asyncio.Future[Any]] = []
        self.answer: list[Verdict] | None = None  # the run's answer, once it landed

    def confirmed_threadsafe(self, verdict: Verdict) -> None:
        """``confirmed``, called from the engine's replay thread."""
        self.loop.call_soon_threadsafe(self.confirmed, verdict)

    def confirmed(self, verdict: Verdict) -> None:
        if self.run.cancel.is_set():
            return
        key = verdict.site.key
        self.verdicts = [verdict if v.site.key == key else v for v in self.verdicts]
        self.scheduler.show_early(self.run, self.verdicts)
        if key in self.keys:
            return
        self.keys.add(key)
        snap = self.snap
        check = self.loop.run_in_executor(
            self.scheduler.fix_pool,
            core.verify_fixes,
            snap.path,
            snap.text,
            list(self.verdicts),
            self.settings,
            snap.root,
            self.run.cancel,
            self.warm,
            {key},
        )
        self.pending.append(check)
        check.add_done_callback(lambda f: self._checked(key, f))

    def _checked(self, key: str, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self.keys.discard(key)  # the run's own fix check does it again
            return
        verdict = next((v for v in future.result() if v.site.key == key), None)
        if verdict is None:
            return
        self.fixed[key] = verdict
        if self.answer is not None:  # the run's answer is shown now: it gets the fixes
            self.answer = self.merged(self.answer)
            self.scheduler.remember(self.run, self.answer)
            self.scheduler.server.publish(self.run.uri)
            return
        self.verdicts = [verdict if v.site.key == key else v for v in self.verdicts]
        self.scheduler.show_early(self.run, self.verdicts)

    def merged(self, verdicts: list[Verdict]) -> list[Verdict]:
        """The run's ``verdicts``, a confirmation's fixes taken from its early check when the
        run confirmed it with the same witness."""
        out = []
        for v in verdicts:
            early = self.fixed.get(v.site.key)
            same = early is not None and v.status is Status.CONFIRMED and early.witness == v.witness
            out.append(dataclasses.replace(v, fixes=early.fixes) if same and early is not None else v)
        return out

    async def settled(self, run: Run) -> bool:
        """Wait for the early checks still running; False when the run was cancelled meanwhile."""
        for future in list(self.pending):
            if await Scheduler._wait(future, run) is None and run.cancel.is_set():
                return False
        return True

    def close_when_done(self) -> None:
        """Close the warm child once no check uses it (a fix check cannot be interrupted)."""
        if self.warm is None:
            return
        running = [f for f in self.pending if not f.done()]
        warm = self.warm

        def close(_: Any = None) -> None:
            threading.Thread(target=warm.close, name="grist-warm-close", daemon=True).start()

        if running:
            asyncio.gather(*running, return_exceptions=True).add_done_callback(close)
        else:
            close()


class Scheduler:
    """Static and dynamic analyses of the open documents of one server."""

    def __init__(self, server: GristServer) -> None:
        self.server = server
        self.static_pool = DaemonExecutor("grist-static")
        self.dynamic_pool = DaemonExecutor("grist-dynamic")
        self.fix_pool = DaemonExecutor("grist-fixes")
        self.static_results: LRU[str, list[Verdict]] = LRU(256)
        self.dynamic_results: LRU[tuple[Any, ...], list[Verdict]] = LRU(64)
        self._static_tasks: dict[str, asyncio.Task[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._runs: dict[str, Run] = {}
        self._last_dynamic: dict[str, list[Verdict]] = {}  # uri -> newest engine answer, any text
        # dynamic key -> the static verdicts with the confirmations a running engine run has
        # already replayed; shown until the run's whole answer replaces them
        self._early: dict[tuple[Any, ...], list[Verdict]] = {}
        self._gate: asyncio.Lock | None = None  # one engine run at a time: the cores are shared
        self.runs_started = 0  # engine runs actually started (exposed for logging)
        self.cache_hits = 0  # engine runs the result cache answered instead
        self._recheck: set[str] = set()  # uris the user asked to re-check: their next run skips the cache

    # --- results ---------------------------------------------------------------

    def dynamic_key(self, snap: Snapshot) -> tuple[Any, ...]:
        return (snap.hash, self.server.settings.engine_key())

    def verdicts_for(self, snap: Snapshot) -> list[Verdict] | None:
        """The best verdicts for exactly this text, or None while none are ready."""
        if not self.server.dynamic_allowed(snap):
            return self.static_results.get(snap.hash)
        dynamic = self.dynamic_results.get(self.dynamic_key(snap))
        if dynamic is not None:
            return dynamic
        early = self._early.get(self.dynamic_key(snap))
        if early is not None:
            return early
        static = self.static_results.get(snap.hash)
        previous = self._last_dynamic.get(snap.uri)
        if static is not None and previous is not None and self.pending(snap.uri):
            return carry_over(static, previous)
        return static

    def pending(self, uri: str) -> bool:
        """A dynamic run is scheduled or running for ``uri``."""
        return uri in self._timers or self.running(uri)

    def remember(self, run: Run, verdicts: list[Verdict]) -> None:
        self.dynamic_results.put(run.key, verdicts)
        self._last_dynamic[run.uri] = verdicts
        self._early.pop(run.key, None)

    def show_early(self, run: Run, verdicts: list[Verdict]) -> None:
        """Show a running run's confirmations so far (``EarlyFixes``) until its answer lands."""
        if run.cancel.is_set() or self._runs.get(run.uri) is not run:
            return
        self._early[run.key] = verdicts
        self.server.publish(run.uri)

    # --- static ----------------------------------------------------------------

    def warm_up(self) -> None:
        """Load the analyzer on the static thread now, so the first didOpen is fast."""
        future = self.static_pool.submit(core.warm_up)
        future.add_done_callback(lambda f: f.exception())  # a failure shows up on first real use

    def kick_static(self, uri: str) -> None:
        """Analyse the current text of ``uri`` soon; bursts of edits share one task."""
        task = self._static_tasks.get(uri)
        if task is not None and not task.done():
            return  # the running task re-reads the latest text before it finishes
        self._static_tasks[uri] = asyncio.ensure_future(self._static(uri))

    async def static_ready(self, uri: str) -> None:
        """Wait until the static verdicts of the current text of ``uri`` exist (a pull waits here)."""
        while True:
            snap = self.server.snapshot(uri)
            if snap is None or snap.hash in self.static_results:
                return
            task = self._static_tasks.get(uri)
            if task is None or task.done():
                self.kick_static(uri)
                task = self._static_tasks[uri]
            await asyncio.wait({task})

    async def _static(self, uri: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            snap = self.server.snapshot(uri)
            if snap is None:
                return
            key = snap.hash
            if key not in self.static_results:
                try:
                    verdicts = await loop.run_in_executor(
                        self.static_pool, core.analyze, snap.path, snap.text, self.server.settings, snap.root
                    )
                except Exception as exc:  # the analyzer promises not to raise; if it does, say so
                    self.server.log_exception(f"static analysis of {snap.path} failed", exc)
                    verdicts = [core.internal_error(snap.path, exc)]
                self.static_results.put(key, verdicts)
            latest = self.server.snapshot(uri)
            if latest is None:
                return
            if latest.hash == key:
                self.server.publish(uri)
                return
            # The text changed while we analysed: go again on the newest text.

    # --- dynamic ---------------------------------------------------------------

    def text_changed(self, uri: str) -> None:
        """A new text: stop a run on an older one (its answer would be stale)."""
        snap = self.server.snapshot(uri)
        run = self._runs.get(uri)
        if run is not None and (snap is None or run.key != self.dynamic_key(snap)):
            run.cancel.set()

    def schedule_dynamic(self, uri: str, delay: float) -> None:
        """Run the engine on ``uri`` after ``delay`` seconds without further edits."""
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        snap = self.server.snapshot(uri)
        if snap is None or not self.server.dynamic_allowed(snap):
            return
        loop = asyncio.get_running_loop()
        self._timers[uri] = loop.call_later(max(0.0, delay), self._start_dynamic, uri)

    def _start_dynamic(self, uri: str) -> None:
        self._timers.pop(uri, None)
        snap = self.server.snapshot(uri)
        if snap is None or not self.server.dynamic_allowed(snap):
            return
        if not self.server.config_ready:
            # didOpen can arrive before configuration: never run code on default settings
            # that a workspace setting might forbid. The server reschedules when ready.
            return
        key = self.dynamic_key(snap)
        if key in self.dynamic_results:
            self.server.publish(uri)
            return
        current = self._runs.get(uri)
        if current is not None:
            if current.key == key and not current.cancel.is_set():
                return  # already working on exactly this text
            current.cancel.set()
        run = Run(uri=uri, key=key)
        self._runs[uri] = run
        run.task = asyncio.ensure_future(self._dynamic(run, snap))

    async def _dynamic(self, run: Run, snap: Snapshot) -> None:
        if self._gate is None:
            self._gate = asyncio.Lock()
        try:
            pending = self._static_tasks.get(run.uri)
            if pending is not None and not pending.done():
                # Static diagnostics first (they are what the user waits for), and they
                # tell whether there is anything for the engine to confirm at all.
                await asyncio.wait({pending})
            if run.cancel.is_set():
                return
            static = self.static_results.get(snap.hash)
            if static is not None and not core.needs_engine(static):
                # Nothing to confirm: the static verdicts are the whole answer.
                self.dynamic_results.put(run.key, static)
                self.server.publish(run.uri)
                return
            if await self._from_cache(run, snap):
                return
            async with self._gate:
                if not run.cancel.is_set():
                    await self._engine_run(run, snap, static or [])
        except Exception as exc:  # never let a run take the server down
            self.server.log_exception("dynamic scheduling failed", exc)
        finally:
            if self._runs.get(run.uri) is run:
                del self._runs[run.uri]

    async def _from_cache(self, run: Run, snap: Snapshot) -> bool:
        """Show the answer the result cache holds for this text (a check by the CLI, or an
        earlier session, stored it), without starting anything; False when it holds none."""
        if run.uri in self._recheck:
            self._recheck.discard(run.uri)
            return False
        loop = asyncio.get_running_loop()
        try:
            verdicts = await loop.run_in_executor(
                self.static_pool, core.cached_answer, snap.path, snap.text, self.server.settings, snap.root
            )
        except Exception as exc:  # a cache that cannot be read is a cache miss
            self.server.log_exception(f"reading the result cache for {snap.path} failed", exc)
            return False
        if verdicts is None or run.cancel.is_set():
            return False
        self.cache_hits += 1
        self.remember(run, verdicts)
        self.server.publish(run.uri)
        self.server.log(f"checked {snap.path}: from the result cache")
        return True

    def _store(self, snap: Snapshot, settings: Settings, verdicts: list[Verdict]) -> None:
        """Put a whole answer in the result cache, on the fix thread (it hashes the project's files)."""

        def done(future: Future[str | None]) -> None:
            problem = None if future.cancelled() or future.exception() else future.result()
            if problem:
                self.server.log(problem)

        future = self.fix_pool.submit(core.remember, snap.path, snap.text, settings, snap.root, verdicts)
        future.add_done_callback(done)

    async def _engine_run(self, run: Run, snap: Snapshot, static: list[Verdict]) -> None:
        """One engine run under the gate: each confirmed bug is shown as soon as its witness
        replayed and its fixes are re-checked at once, while the search goes on; the run's whole
        answer then replaces them, and the fixes of the sites confirmed last are checked."""
        loop = asyncio.get_running_loop()
        self.runs_started += 1
        name = snap.path.rsplit("/", 1)[-1]
        progress = await self.server.begin_progress(f"GRIST: running {name}", run.cancel)
        outcome = "cancelled"
        started = loop.time()
        # One warm child replays the witnesses and then runs the fix checks: one torch start-up.
        snap_settings = self.server.settings
        warm = core.warm_child(snap.path, snap_settings, snap.root)
        early = EarlyFixes(self, run, snap, snap_settings, warm)
        try:
            confirm = loop.run_in_executor(
                self.dynamic_pool,
                core.confirm_file,
                snap.path,
                snap.text,
                snap_settings,
                snap.root,
                progress.report_threadsafe,
                run.cancel,
                warm,
                early.confirmed_threadsafe,
            )
            verdicts = await self._wait(confirm, run)
            if verdicts is None:
                return
            # Show the whole answer now (with the fixes checked so far); the rest follow.
            verdicts = early.answer = early.merged(verdicts)
            self.remember(run, verdicts)
            self.server.publish(run.uri)
            outcome = "done"
            shown = os.path.relpath(snap.path, snap.root) if snap.root else snap.path
            self.server.log(run_summary(shown, static, verdicts, loop.time() - started))
            if core.needs_fixes(verdicts):
                progress.report_threadsafe("re-checking the fixes", 1.0)
                rest = loop.run_in_executor(
                    self.fix_pool,
                    core.verify_fixes,
                    snap.path,
                    snap.text,
                    verdicts,
                    snap_settings,
                    snap.root,
                    run.cancel,
                    warm,
                    {v.site.key for v in verdicts} - early.keys,
                )
                early.pending.append(rest)
                fixed = await self._wait(rest, run)
                if fixed is not None and await early.settled(run):
                    early.answer = early.merged(fixed)
                    self.remember(run, early.answer)
                    self.server.publish(run.uri)
                    # Every site's fixes are checked now, as `grist-lsp --check` checks them. (An
                    # answer without a confirmation had no fixes checked here: not stored.)
                    self._store(snap, snap_settings, early.answer)
        except Exception as exc:
            outcome = "failed"
            self.server.log_exception(f"the dynamic check of {snap.path} failed", exc)
            failed = list(self.static_results.get(snap.hash) or []) + [core.internal_error(snap.path, exc)]
            self.dynamic_results.put(run.key, failed)
            self.server.publish(run.uri)
        finally:
            progress.end(outcome)
            self._early.pop(run.key, None)
            early.close_when_done()

    @staticmethod
    async def _wait(future: asyncio.Future[Any], run: Run) -> Any:
        """The result of ``future``, or None as soon as ``run`` is cancelled.

        The engine kills its workers on cancel; fix verification cannot be interrupted,
        so a cancelled one is left to finish on its own thread while newer work goes on.
        """
        while True:
            done, _ = await asyncio.wait({future}, timeout=0.1)
            if done:
                try:
                    return future.result()
                except core.Cancelled:
                    return None
            if run.cancel.is_set():
                future.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)
                return None

    def running(self, uri: str) -> bool:
        run = self._runs.get(uri)
        return run is not None and not run.cancel.is_set()

    # --- lifecycle -------------------------------------------------------------

    def forget(self, uri: str) -> None:
        """Drop cached results of the current text of ``uri`` (re-check) and stop its run."""
        snap = self.server.snapshot(uri)
        if snap is None:
            return
        self.static_results.drop(lambda k: k == snap.hash)
        self.dynamic_results.drop(lambda k: k[0] == snap.hash)
        self._recheck.add(uri)
        run = self._runs.get(uri)
        if run is not None:
            run.cancel.set()

    def config_changed(self) -> None:
        """A pyproject.toml changed: every cached result may be stale. Stop the runs and start over."""
        self.cancel_all()
        self.static_results.drop(lambda k: True)
        self.dynamic_results.drop(lambda k: True)
        for uri in sorted(self.server.open_uris):
            self.kick_static(uri)
            self.schedule_dynamic(uri, 0.0)

    def close(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        run = self._runs.get(uri)
        if run is not None:
            run.cancel.set()
        self._last_dynamic.pop(uri, None)

    def cancel_all(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for run in self._runs.values():
            run.cancel.set()

    def shutdown(self) -> None:
        self.cancel_all()
        self.static_pool.shutdown(wait=False)
        self.dynamic_pool.shutdown(wait=False)
        self.fix_pool.shutdown(wait=False)
