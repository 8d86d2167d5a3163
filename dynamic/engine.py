"""The engine's public entry point: ``confirm`` possible sites in worker subprocesses.

Owns the parent side: splitting the sites over ``jobs`` workers, resource
limits (RLIMIT_AS, wall-clock deadline, process-group kill), streaming results,
cancellation, turning crashes/hangs into ``error`` verdicts, replaying every
witness in a fresh process before calling it confirmed, and writing
reproducers when asked. The user's code never runs in this process.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from grist_lsp.model import NOT_REPLAYED, Site, Status, Verdict, Witness, counted, file_error, to_json

from .budget import CLOCK_CAP, CLOCK_FLOOR, SLICES_PER_SITE
from .executors.child import WORKER_MODULE, Subprocess, WarmChild, WorkerResult, child_confinement
from .failures import DISTRIBUTED_HINT, SYNTHETIC_DATA, stand_in_note, waited_in_distributed
from .options import EngineOptions
from .protocol import Message, ReplayAnswer, ReplayTask, SiteReport
from .sandbox import BLOCKED, Confinement, blocked_note


class UnusableEntry(Exception):
    """An explicit entry (``--entry`` / ``entries``) that a worker could not use: its message
    names the file, the function and what an entry must return. A usage error of the caller's,
    raised by ``confirm`` instead of verdicts found some other way."""


# Wall seconds per CPU second of search the parent waits for before it kills a worker: searches are
# capped in CPU time (``budget.cap_clock``), and a busy machine stretches those into more wall time.
LOAD_ROOM = 3.0


def with_note(
    verdicts: list[Verdict], errors: list[Verdict], note: str | None
) -> tuple[list[Verdict], list[Verdict]]:
    """``note`` (what the sandbox blocked, data made up here) added to the reason of the verdicts
    the engine ran, or of the file's errors when no site was reached."""
    if not note:
        return verdicts, errors
    ran = [v for v in verdicts if v.status in (Status.CONFIRMED, Status.POSSIBLE) and v.site.op]
    target = ran or errors
    noted = [dataclasses.replace(v, reason=f"{v.reason}; {note}" if v.reason else note) for v in target]
    swap = {id(v): n for v, n in zip(target, noted)}
    return [swap.get(id(v), v) for v in verdicts], [swap.get(id(v), v) for v in errors]


def notes_in(verdicts: list[Verdict]) -> list[str]:
    """The notes ``with_note`` put on a file's verdicts (what the sandbox blocked, data made up
    here), each once: the CLI says them on stderr, where a finding's reason is not shown."""
    notes: list[str] = []
    for v in verdicts:
        for part in (v.reason or "").split("; "):
            if (part.endswith(BLOCKED) or part == SYNTHETIC_DATA) and part not in notes:
                notes.append(part)
    return notes


def _crash_location(stderr: str, target: str) -> int | None:
    """The innermost line of the target file in a faulthandler dump (most recent call first)."""
    for m in re.finditer(r'File "([^"]+)", line (\d+)', stderr):
        if os.path.abspath(m.group(1)) == target:
            return int(m.group(2))
    return None


def _worker_failure(path: str, res: WorkerResult, options: EngineOptions, seconds: float) -> Verdict | None:
    target = os.path.abspath(path)
    line = _crash_location(res.stderr, target)
    where = f" at {path}:{line}" if line else ""
    rc = res.returncode
    if res.finished and not res.timed_out:
        return None  # killed after its last result, or exited normally
    kind = "crash"
    if res.timed_out and waited_in_distributed(res.stderr):
        kind = "needs-distributed"
        msg = (
            f"{path}: the program needs torch.distributed: it waited for the other processes of its "
            f"process group{where} until it was stopped after {seconds:.0f} s; {DISTRIBUTED_HINT}"
        )
    elif res.timed_out:
        kind = "timeout"
        msg = (
            f"{path}: the program did not finish within {seconds:.0f} s{where} (a hang?): "
            "give a lighter entry with --entry file.py:function or raise the timeout"
        )
    elif rc is not None and rc < 0:
        sig = -rc
        if sig == signal.SIGSEGV:
            msg = f"{path}: the program crashed with a segmentation fault{where}: fix the native call there"
        elif sig == signal.SIGKILL:
            kind = "memory"
            msg = f"{path}: the program was killed{where} (out of memory? limit {options.memory_mb} MB)"
        else:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            msg = f"{path}: the program was stopped by signal {name}{where}"
    elif "MemoryError" in res.stderr or "can't allocate memory" in res.stderr:
        kind = "memory"
        msg = f"{path}: the program ran out of memory{where} (limit {options.memory_mb} MB): reduce what it allocates"
    elif not res.finished:
        last = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        msg = f"{path}: the engine's worker stopped (exit status {rc}){where}: {last[-1] if last else 'no output'}"
    else:
        return None
    return file_error(path, msg, line or 1, error_kind=kind)


def _render_message(site: Site, witness: Witness, detail: str) -> str:
    return detail or f"{site.op} produces {witness.result} ({witness.entry})"


class WitnessReplays:
    """Each witness replayed in a fresh process as soon as a worker sends it, while the other sites
    are still searched: in a replay child of this call's own, started with the workers (its torch
    import overlaps their search), or in the caller's warm child, which then goes on to the fix
    checks without a start-up of its own."""

    def __init__(
        self,
        path: str,
        text: str,
        options: EngineOptions,
        confinement: Confinement | None,
        warm: WarmChild | None,
        on_answer: Callable[[str, ReplayAnswer], None] | None = None,
    ) -> None:
        self.path, self.text, self.warm, self.on_answer = path, text, warm, on_answer
        self.seconds = options.timeout + 10.0
        self.own: Subprocess | None = None
        self.answers: dict[str, ReplayAnswer] = {}
        self._queue: queue.Queue[tuple[str, Site, Witness] | None] = queue.Queue()
        if warm is None:
            self.own = Subprocess("grist_lsp.dynamic.replay", options.memory_mb, confinement)
            self.own.start()
            self.own.send({"type": "file", "text": text})
        else:
            warm.start()
            self._thread = threading.Thread(target=self._serve, name="grist-replays", daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        assert self.warm is not None
        while (item := self._queue.get()) is not None:
            key, site, witness = item
            res = self.warm.run(ReplayTask(self.path, self.text, site, witness), self.seconds)
            self.answers[key] = ReplayAnswer(
                key,
                bool(res.get("reproduced")),
                str(res.get("detail") or res.get("error", "")),
                res.get("result", ""),
            )
            if self.on_answer is not None:
                self.on_answer(key, self.answers[key])

    def submit(self, key: str, site: Site, witness: Witness) -> None:
        if self.own is not None:
            self.own.send({"type": "witness", "site": to_json(site), "witness": to_json(witness)})
        else:
            self._queue.put((key, site, witness))

    def results(self, count: int, cancel: threading.Event | None) -> dict[str, ReplayAnswer]:
        """Wait for the ``count`` replays sent (site key -> answer)."""
        if self.own is not None:
            return self.own.finish(self.seconds + 5.0 * count, cancel).replays
        self._queue.put(None)
        self._thread.join(self.seconds + 5.0 * count)
        return dict(self.answers)

    def discard(self) -> None:
        if self.own is not None:
            self.own.discard()
        else:
            self._queue.put(None)

    @property
    def reports(self) -> list[WorkerResult]:
        """What the replay child said besides its answers (actions the sandbox blocked)."""
        return [self.own.res] if self.own is not None else []


def confirm(
    path: str,
    text: str,
    verdicts: list[Verdict],
    options: EngineOptions,
    progress: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    warm: WarmChild | None = None,
    on_confirmed: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Possible verdicts -> confirmed (with a replayed Witness) where the search succeeds.

    Safe verdicts are untouched; a program that cannot run adds one ``error``
    verdict (import error, exception, hang, crash, out of memory) naming the line. An explicit
    entry that cannot be used raises ``UnusableEntry``.
    ``warm``: a child the caller keeps for later work (fix checks), used for the replays.
    ``on_confirmed``: called (from a helper thread) with each verdict as soon as its witness
    replayed, while the other sites are still searched, so an editor can show it at once;
    with ``warm`` only (without it the replays answer together at the end).
    With ``warm`` the workers are forked from its server (no torch start-up of their own).
    """
    targets = [v for v in verdicts if v.status is Status.POSSIBLE and v.site.op]
    if not targets or (cancel is not None and cancel.is_set()):
        return list(verdicts)
    sites = [v.site for v in verdicts if v.site.op]
    # One worker searches all of a file's sites, whatever ``jobs`` says (``jobs`` runs files, and
    # a file's fix checks, side by side). A site's result then depends on the seed and the options
    # only: in one worker the sites are searched in one fixed order, every recording run watches
    # them all, and a site broken by another site's search (``harvest``) is broken by the same run
    # at any ``--jobs``, where workers splitting the sites made each one's report depend on which
    # sites shared its worker. It also imports torch once per file, and a site no run reaches
    # holds no worker of its own; one training run already watched every site.
    groups = [targets]
    confinement = child_confinement(options, path)  # the sandbox: one per file, for all its children
    by_key = {v.site.key: v for v in targets}
    on_line = _SiteLines({k: v.site for k, v in by_key.items()}, len(targets), progress)

    def answered(key: str, replay: ReplayAnswer) -> None:
        verdict = _after_search(by_key[key], on_line.lines[key], replay)
        if on_confirmed is not None and verdict.status is Status.CONFIRMED:
            on_confirmed(verdict)

    replayer = WitnessReplays(path, text, options, confinement, warm, answered)
    on_line.replayer = replayer
    workers = [_WorkerRun(path, text, group, sites, options) for group in groups]
    forked = warm.child(WORKER_MODULE) if warm is not None else None
    threads = [
        threading.Thread(
            target=w.run,
            args=(on_line, cancel, confinement, forked if i == 0 else None),
            name=f"grist-worker-{i}",
        )
        for i, w in enumerate(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    results = [w.result for w in workers]
    bad = next((r.bad_entry for r in results if r.bad_entry is not None), None)
    if bad is not None:
        replayer.discard()
        raise UnusableEntry(bad.message)
    lines: dict[str, SiteReport] = {}
    for res in results:
        lines.update(res.sites)
    errors = _worker_errors(path, workers, options)
    found = {k: m for k, m in lines.items() if m.witness is not None}
    replays: dict[str, ReplayAnswer] = {}
    if found and not (cancel is not None and cancel.is_set()):
        if progress is not None:
            progress(f"replaying {counted(len(found), 'witness', 'witnesses')} in a fresh process", 1.0)
        replays = replayer.results(len(found), cancel)
    else:
        replayer.discard()

    out: list[Verdict] = []
    for v in verdicts:
        m = lines.get(v.site.key) if v.status is Status.POSSIBLE else None
        out.append(v if m is None else _after_search(v, m, replays.get(v.site.key)))
    if options.write_reproducers and isinstance(options.write_reproducers, str):
        _write_reproducers(out, options.write_reproducers)
    # --- sandbox: what the program was refused goes on the file's verdicts, never silently ---
    out, errors = with_note(out, errors, blocked_note([*results, *replayer.reports]))
    # --- data stood in for: a witness on synthetic images says so wherever it is shown ---
    out, errors = with_note(out, errors, stand_in_note(text))
    return out + errors


@dataclass
class _SiteLines:
    """What ``confirm`` does with each line a worker sends: a witness goes to its replay at
    once, and every searched site is a step of the progress."""

    by_key: dict[str, Site]  # the target sites
    total: int  # how many target verdicts
    progress: Callable[[str, float], None] | None
    replayer: WitnessReplays | None = None  # set before the workers start
    lines: dict[str, SiteReport] = field(default_factory=dict)  # kept for each replay's answer
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, msg: Message) -> None:
        if not isinstance(msg, SiteReport):
            return
        if msg.witness is not None and msg.key in self.by_key:
            assert self.replayer is not None
            self.lines[msg.key] = msg
            self.replayer.submit(msg.key, self.by_key[msg.key], msg.witness)
        if self.progress is not None:
            with self.lock:
                self.done += 1
                n = self.done
            state = "confirmed" if msg.witness is not None else "searched"
            site = self.by_key.get(msg.key)
            # Columns 1-based, as the report prints them (a key's are the core's 0-based ones).
            where = f"{site.span.start_line}:{site.span.start_col + 1} {site.op}" if site else msg.key
            self.progress(f"{state} {where} ({n}/{self.total})", n / self.total)


@dataclass
class _WorkerRun:
    """One worker subprocess searching a group of the target verdicts' sites."""

    path: str
    text: str
    group: list[Verdict]
    sites: list[Site]  # every site of the file: each run watches them all
    options: EngineOptions
    result: WorkerResult = field(default_factory=WorkerResult)

    @property
    def seconds(self) -> float:
        """The worker's wall clock: each site's searches (at most ``CLOCK_CAP`` times its budget in
        CPU seconds, the cap on a search, and ``CLOCK_FLOOR`` more a slice), shrinking and start-up
        about one more, and room for a machine that gives the worker a share of a core only
        (``LOAD_ROOM``): a hang's last net."""
        per_site = CLOCK_CAP * self.options.budget + SLICES_PER_SITE * CLOCK_FLOOR
        searches = per_site * (len(self.group) + 1)
        return self.options.timeout + LOAD_ROOM * searches + 10.0

    def run(
        self,
        on_line: Callable[[Message], None],
        cancel: threading.Event | None,
        confinement: Confinement | None,
        child: Subprocess | None = None,
    ) -> None:
        """Search this group's sites in ``child`` (already started) or in a new worker."""
        options = self.options
        request = {
            "path": self.path,
            "text": self.text,
            "targets": [to_json(v.site) for v in self.group],
            "sites": [to_json(s) for s in self.sites],
            "budget": options.budget,
            "seed": options.seed,
            "entries": list(options.entries or []),
            "script_args": dict(options.script_args),
            "project_root": options.project_root,
            "via": options.via,
            "record_timeout": options.timeout,
            "memory_mb": options.memory_mb,
            "worker_seconds": self.seconds - 5.0,
        }
        if child is None:
            child = Subprocess(WORKER_MODULE, options.memory_mb, confinement)
        self.result = child.communicate(request, self.seconds, on_line, cancel)


def _worker_errors(path: str, workers: list[_WorkerRun], options: EngineOptions) -> list[Verdict]:
    """The file's ``error`` verdicts: what the workers reported, then how a worker failed
    (crash, hang, out of memory), each message once; none from a cancelled worker."""
    errors: list[Verdict] = []
    seen: set[str] = set()
    for w in workers:
        res = w.result
        if res.cancelled:
            continue
        for e in res.errors:
            if e.message not in seen:
                seen.add(e.message)
                errors.append(file_error(path, e.message, e.line or 1, e.col, error_kind=e.kind))
        failure = _worker_failure(path, res, options, w.seconds)
        if failure is not None and failure.message not in seen:
            seen.add(failure.message)
            errors.append(failure)
    return errors


def _after_search(v: Verdict, line: SiteReport, replay: ReplayAnswer | None) -> Verdict:
    """A possible verdict after its search (the worker's ``line``) and its witness's replay:
    confirmed when a witness replayed, else still possible with what the search saw."""
    if line.witness is None:
        note = line.note
        return dataclasses.replace(
            v, reason=f"{v.reason}; dynamic: {note}" if v.reason else f"dynamic: {note}"
        )
    witness = dataclasses.replace(line.witness)  # the report stays as the worker sent it
    if replay is None or not replay.reproduced:
        why = replay.detail if replay else "the replay process did not answer"
        note = f"dynamic: a witness was found ({line.message}) but {NOT_REPLAYED}: {why}"
        return dataclasses.replace(v, reason=f"{v.reason}; {note}" if v.reason else note)
    witness.replayed = True
    message = _render_message(v.site, witness, line.message)
    # The entry's kind in words too: a probe's inputs were made up, not passed by a caller.
    entry = (
        f"probe (synthesized inputs) {witness.entry}" if witness.entry.startswith("probe:") else witness.entry
    )
    return dataclasses.replace(
        v,
        status=Status.CONFIRMED,
        witness=witness,
        message=message,
        # No seconds here: the reason is the report's, which one seed makes the same on any machine
        # (the witness's own ``seconds`` field keeps the time).
        reason=f"{message} [{line.note}, {counted(witness.iterations, 'run')}, {entry}]",
    )


def _write_reproducers(verdicts: list[Verdict], directory: str) -> None:
    from grist_lsp.dynamic.reproducer import render_reproducer, reproducer_filename

    os.makedirs(directory, exist_ok=True)
    taken: set[str] = set()
    for v in verdicts:
        if v.status is not Status.CONFIRMED or v.witness is None:
            continue
        name = reproducer_filename(v.site)
        if name in taken:
            # Two sites of one kind on one line: the column tells their reproducers apart.
            name = f"{name[:-3]}_col{v.site.span.start_col + 1}.py"
        taken.add(name)
        try:
            rep = render_reproducer(v.site, v.witness, directory, filename=name)
        except Exception:  # a reproducer we cannot render must not lose the finding
            continue
        target = os.path.join(directory, rep.filename)
        with open(target, "w", encoding="utf-8") as f:
            f.write(rep.source)
        for payload, data in rep.payloads.items():
            p = os.path.join(directory, payload)
            with open(p, "wb") as f:
                f.write(data)
            v.witness.payload = os.path.abspath(p)
        v.witness.reproducer = os.path.abspath(target)
        v.witness.reproducer_source = rep.source
