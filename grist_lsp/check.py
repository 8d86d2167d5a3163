"""`check_paths`: what `grist-lsp --check` runs, through the one service (`service.py`).

It asks the service for the decided settings, finds the files, runs the static pass on
each (the project's suppressions and baseline applied), runs the dynamic GRIST engine on the
files with open sites (files in parallel, each confirmed and its fixes verified by
`Service.check_file`), then, when asked, applies or diffs the verified fixes. A file that
cannot be read, parsed or run becomes an `error` verdict; the run goes on with the other files.

The dynamic engine is imported only when used (inside the service), so a `--static-only` run
never imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grist_lsp.config import ConfigError
from grist_lsp.defaults import default
from grist_lsp.discovery import discover
from grist_lsp.dynamic.executors.files import FileExecutor, Lost
from grist_lsp.edits import apply_fixes, unified_diff
from grist_lsp.model import STATUS_RANK, Fix, Status, Verdict, file_error
from grist_lsp.notebooks import CELL_ERROR, Notebook, NotebookError, is_notebook, magics_note, read_notebook
from grist_lsp.service import CheckOptions, ProgressFn, Service, Settings, resolve_settings
from grist_lsp.suppressions import Suppression

if TYPE_CHECKING:
    from grist_lsp.dynamic.executors.spares import Spares
    from grist_lsp.dynamic.options import EngineOptions
    from grist_lsp.dynamic.verify import SharedChild

__all__ = ["CheckOptions", "Report", "Settings", "check_paths", "resolve_settings"]

DEFAULT_FAIL_ON: str = default("fail_on")


@dataclass
class Report:
    """Everything a run found, in the order people read it (file, line, column)."""

    verdicts: list[Verdict]
    stats: dict[str, Any]
    root: Path = field(default_factory=Path.cwd)  # repository/project root: SARIF paths are relative to it
    fail_on: str = DEFAULT_FAIL_ON
    files: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)  # file -> unified diff of verified fixes
    fixed: list[Verdict] = field(default_factory=list)  # verdicts removed by --fix
    warnings: list[str] = field(default_factory=list)  # said on stderr, never fatal
    unused_suppressions: list[tuple[str, Suppression]] = field(default_factory=list)  # (file, comment)
    baseline_written: str | None = None  # the file --write-baseline wrote
    # Notebooks checked, by file: their verdicts' lines are lines of the notebook's script, which
    # the output turns into a cell and a line in it (``notebooks.py``).
    notebooks: dict[str, Notebook] = field(default_factory=dict)
    # Files named .ipynb that are no notebook -> what is wrong (the CLI says it and exits 2).
    invalid: dict[str, str] = field(default_factory=dict)
    magics: dict[str, list[str]] = field(default_factory=dict)  # notebook as shown -> magics left out

    def failing(self) -> list[Verdict]:
        """The verdicts at or above `fail_on` (what makes the CLI exit 1), and every program that
        could not be imported at all: nothing of it was checked, which must not read as clean."""
        threshold = STATUS_RANK[Status(self.fail_on)]
        return [
            v
            for v in self.verdicts
            if v.status is not Status.SAFE
            and (STATUS_RANK[v.status] >= threshold or v.error_kind == "import-error")
        ]


def _read_text(path: Path) -> str | None:
    try:
        # newline="" keeps CRLF files CRLF when --fix writes them back.
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None  # the static pass already reported why


def _read_program(path: Path, report: Report) -> str | None:
    """The Python text of a file to check: a ``.py`` file's text, a notebook's script (the
    notebook kept in ``report.notebooks``; one that is not a notebook goes to ``report.invalid``)."""
    text = _read_text(path)
    if text is None or not is_notebook(path):
        return text
    try:
        notebook = read_notebook(str(path), text)
    except NotebookError as exc:
        report.invalid[str(path)] = exc.problem
        return None
    report.notebooks[str(path)] = notebook
    report.magics[_display(path)] = notebook.magics  # stderr names the file as the user typed it
    return notebook.script


def _notebook_verdicts(path: Path, report: Report) -> list[Verdict]:
    """The error verdicts of a notebook that could not be read, or of its cells left out."""
    notebook = report.notebooks.get(str(path))
    if notebook is None:
        problem = report.invalid.get(str(path), "cannot be read as UTF-8 text; save it as UTF-8")
        return [file_error(str(path), f"{path}: {problem}")]
    return notebook.cell_errors()


def _has_open_sites(verdicts: list[Verdict]) -> bool:
    return any(v.status is Status.POSSIBLE for v in verdicts)


def _runnable(verdicts: list[Verdict]) -> bool:
    # A file-level error (unreadable, syntax error) has an empty op: nothing to run.
    return not any(v.status is Status.ERROR and not v.site.op and v.site.kind != CELL_ERROR for v in verdicts)


@dataclass
class _Run:
    """What a run has found so far, file by file."""

    service: Service
    report: Report
    files: list[Path]
    per_file: dict[Path, list[Verdict]] = field(default_factory=dict)
    texts: dict[Path, str] = field(default_factory=dict)
    suppressed: int = 0
    baselined: int = 0
    cached: int = 0  # files whose dynamic results came from the result cache
    spares: Spares[SharedChild] | None = (
        None  # children started ahead of the searches, for the first file searched
    )


def check_paths(paths: list[str], options: CheckOptions, progress: ProgressFn | None = None) -> Report:
    """Check files and folders; raises ConfigError / discovery.PathNotFound for usage errors only."""
    started = time.monotonic()
    service = Service.resolve(paths, options)
    settings = service.settings
    files = discover(paths or ["."], service.discovery(force_exclude=options.force_exclude))
    report = Report(
        verdicts=[],
        stats={},
        root=_repo_root(settings.root),
        fail_on=settings.fail_on,
        files=[str(f) for f in files],
    )
    if not files:
        report.warnings.append(f"no Python files found under {', '.join(paths or ['.'])}")
    run = _Run(service, report, files)
    # A search is likely (no cache, or one that never saw these options and versions): its first
    # children import torch while the static pass runs. A warm cache starts them on a miss only.
    # Ray tasks start their own children: for them, Ray is imported meanwhile instead.
    searching = bool(files) and not settings.static_only
    local = settings.executor == "local"
    if searching and not local:
        _prepare_ray()
    if searching and local and (service.cache is None or service.cache.cold()):
        run.spares = service.spares(str(files[0]))
    try:
        _static_pass(run, options, progress)
        if not settings.static_only:
            _dynamic_pass(run, options, progress)
    finally:
        if run.spares is not None:
            run.spares.close()
    if options.fix or options.diff:
        _apply_verified(run.per_file, run.texts, options, report)
    _finish(run, time.monotonic() - started)
    if options.write_baseline is not None:
        _write_baseline(Path(options.write_baseline), report.verdicts, settings.root)
        report.baseline_written = options.write_baseline
    if progress:
        progress("done", 1.0)
    return report


def _dynamic_pass(run: _Run, options: CheckOptions, progress: ProgressFn | None) -> None:
    """The engine on every file with open sites, and on the project modules checked programs run."""
    run_by = _modules_run_by(run)
    todo = [
        p
        for p in [*run.files, *run_by]
        if p in run.per_file
        and p in run.texts
        and _runnable(run.per_file[p])
        and _has_open_sites(run.per_file[p])
    ]
    _run_dynamic(todo, run, options, progress, run_by)
    for module in run_by:
        # Only what the checked program was seen to break there: the module itself was not named.
        run.per_file[module] = [v for v in run.per_file[module] if v.status is Status.CONFIRMED]


def _static_pass(run: _Run, options: CheckOptions, progress: ProgressFn | None) -> None:
    share = 1.0 if run.service.settings.static_only else 0.2  # of the progress bar
    for index, path in enumerate(run.files):
        if options.cancel is not None and options.cancel.is_set():
            break
        if progress:
            progress(f"static {path.name}", index / max(1, len(run.files)) * share)
        text = _read_program(path, run.report)
        if text is not None:
            run.texts[path] = text
        if is_notebook(path):
            if text is None:  # no notebook: nothing to analyse
                run.per_file[path] = _notebook_verdicts(path, run.report)
                continue
            # The script is analysed, not the .ipynb file: its JSON is no Python.
            prepared = run.service.static(str(path), text, on_disk=False)
            run.per_file[path] = _notebook_verdicts(path, run.report) + prepared.verdicts
        else:
            prepared = run.service.static(str(path), text, on_disk=True)
            run.per_file[path] = prepared.verdicts
        run.suppressed += prepared.suppressed
        run.baselined += prepared.baselined
        if options.show_unused_suppressions:
            run.report.unused_suppressions.extend((str(path), s) for s in prepared.unused)


def _finish(run: _Run, seconds: float) -> None:
    """The report's verdicts in reading order, and its counts."""
    settings = run.service.settings
    note = magics_note(run.report.magics)
    if note:
        run.report.warnings.insert(0, note)
    verdicts = [v for vs in run.per_file.values() for v in vs]
    verdicts.sort(key=lambda v: (v.site.file, v.site.span.start_line, v.site.span.start_col, v.site.op))
    run.report.verdicts = verdicts
    counts = {s.value: 0 for s in Status}
    for v in verdicts:
        counts[v.status.value] += 1
    run.report.stats = {
        "files": len(run.files),
        **counts,
        "fixed": len(run.report.fixed),
        "cached": run.cached,
        "suppressed": run.suppressed,
        "baselined": run.baselined,
        "dynamic": not settings.static_only,
        "budget": settings.budget,
        "seed": settings.seed,
        "jobs": settings.jobs,
        "seconds": round(seconds, 3),
    }


def _write_baseline(target: Path, verdicts: list[Verdict], root: Path) -> None:
    from grist_lsp.baseline import render_baseline

    try:
        target.write_text(render_baseline(verdicts, root), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"--write-baseline {target}: cannot write the file ({exc.strerror}); pass a writable path"
        ) from exc


def _repo_root(root: Path) -> Path:
    """The git work tree holding ``root`` (what code scanning resolves SARIF paths against), else ``root``."""
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            return folder
    return root


def _modules_run_by(run: _Run) -> dict[Path, Path]:
    """The project modules that a checked test or script imports and that were not checked
    themselves -> that program. Their open sites join the dynamic run, entered through it alone
    (``EngineOptions.via``), so a bug two files away is reported at its own file and line."""
    from grist_lsp.analyzer.programs import is_script, is_test_file
    from grist_lsp.discovery import imported_modules

    run_by: dict[Path, Path] = {}
    for program in run.files:
        text = run.texts.get(program)
        if text is None or not (is_test_file(program.name) or is_script(text)):
            continue
        for module in imported_modules(program, text, run.service.settings.root):
            if module in run.per_file or module in run_by:
                continue
            module_text = _read_text(module)
            if module_text is None:
                continue
            prepared = run.service.static(str(module), module_text, on_disk=True)
            if _has_open_sites(prepared.verdicts):
                run.per_file[module], run.texts[module], run_by[module] = (
                    prepared.verdicts,
                    module_text,
                    program,
                )
    return run_by


def _prepare_ray() -> None:
    """Ray missing: a usage error now, before any work; else import it while the static pass runs."""
    from grist_lsp.dynamic.executors import ray_tasks

    try:
        ray_tasks.require_ray()
    except ray_tasks.RayUnavailable as exc:
        raise ConfigError(str(exc)) from None
    threading.Thread(target=ray_tasks.preload, name="grist-import-ray", daemon=True).start()


def _import_rewrites() -> None:
    from grist_lsp.analyzer import fixes  # noqa: F401  (loaded for later; libcst is a second of imports)


@dataclass
class FileUnit:
    """One file's dynamic check, as sent to an executor (picklable: a Ray task gets it)."""

    path: str
    text: str
    verdicts: list[Verdict]
    options: EngineOptions


def check_unit(service: Service, unit: FileUnit) -> tuple[list[Verdict], list[str]]:
    """A unit's check where no caller's progress, cancel or spares reach (a Ray task)."""
    return service.check_file(unit.path, unit.text, unit.verdicts, unit.options)


def _executor(settings: Settings, workers: int) -> FileExecutor:
    """The file executor ``settings`` name; a usage error when Ray is asked for and unusable."""
    if settings.executor == "ray":
        from grist_lsp.dynamic.executors.ray_tasks import RayExecutor, RayUnavailable

        try:
            return RayExecutor(settings.ray_address, workers)
        except RayUnavailable as exc:
            raise ConfigError(str(exc)) from None
    from grist_lsp.dynamic.executors.local import LocalExecutor

    return LocalExecutor(workers)


def _run_dynamic(
    todo: list[Path],
    run: _Run,
    options: CheckOptions,
    progress: ProgressFn | None,
    run_by: dict[Path, Path],
) -> None:
    """Confirm open sites, then verify fixes, one file per unit of the executor (local: a thread
    each, whose workers are subprocesses; ray: a Ray task each)."""
    if not todo:
        return
    service, warnings = run.service, run.report.warnings
    keys = {p: service.cache_key(str(p), run.texts[p], run.per_file[p], _via(p, run_by)) for p in todo}
    misses = []
    for path in todo:
        hit = service.cached(keys[path])
        if hit is None:
            misses.append(path)
            continue
        run.per_file[path] = hit.verdicts
        warnings.extend(hit.notes)
        run.cached += 1
    if not misses:
        return  # nothing to run: no worker starts, torch is not imported
    todo = misses
    remote = service.settings.executor != "local"
    if run.spares is None and not remote:
        run.spares = service.spares(str(todo[0]))
    # The rewrites are needed once the first search ends: import them while this process only
    # waits for the workers.
    threading.Thread(target=_import_rewrites, name="grist-import-fixes", daemon=True).start()
    # Parallel across files first (separate programs share nothing); the engine
    # gets the remaining workers for its sites when there are fewer files than jobs.
    file_workers = min(service.settings.jobs, len(todo))
    opts = service.engine_options(jobs=max(1, service.settings.jobs // file_workers))
    sandbox_warning = service.sandbox_warning(opts)  # the OS sandbox unavailable: say so and why
    if sandbox_warning:
        warnings.append(sandbox_warning)
    tally = _Tally(len(todo), progress)
    # Our own event too, so Ctrl-C can stop the engine's workers even when the caller gave none.
    cancel = options.cancel or threading.Event()
    units = {
        str(p): FileUnit(
            str(p),
            run.texts[p],
            run.per_file[p],
            dataclasses.replace(opts, via=_via(p, run_by)),
        )
        for p in todo
    }

    def local(unit: FileUnit) -> tuple[list[Verdict], list[str]]:
        path = Path(unit.path)
        return service.check_file(
            unit.path, unit.text, unit.verdicts, unit.options, tally.for_file(path), cancel, run.spares
        )

    executor = _executor(service.settings, file_workers)
    try:
        # A task gets the settings only: the cache is this process's, read and written here.
        work = functools.partial(check_unit, dataclasses.replace(service)) if remote else local
        for key, outcome in executor.map(work, units):
            path = Path(key)
            if isinstance(outcome, Lost):
                run.per_file[path] = [*run.per_file[path], _lost(key, outcome)]
            else:
                verdicts, notes = outcome
                run.per_file[path] = verdicts
                warnings.extend(notes)
                # A cancelled check's answer is partial: never stored.
                problem = None if cancel.is_set() else service.remember(keys[path], key, verdicts, notes)
                if problem and problem not in warnings:
                    warnings.append(problem)
            tally.file_done(path)
    except BaseException:
        # Ctrl-C (or any failure here): tell running searches to kill their workers, start no more.
        cancel.set()
        raise
    finally:
        executor.close()


def _lost(path: str, lost: Lost) -> Verdict:
    return file_error(
        path,
        f"{path}: not checked dynamically: {lost.reason}; its static findings stand; "
        "run the check again, or with --executor local",
        error_kind="crash",
    )


def _via(path: Path, run_by: dict[Path, Path]) -> str | None:
    """The program ``path`` is entered through, when it was not checked itself (``_modules_run_by``)."""
    return str(run_by[path]) if path in run_by else None


@dataclass
class _Tally:
    """The progress bar of the dynamic part (its last 80 %), fed from the files' threads."""

    total: int
    progress: ProgressFn | None
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def for_file(self, path: Path) -> ProgressFn:
        def file_progress(message: str, fraction: float) -> None:
            if self.progress:
                with self.lock:
                    overall = 0.2 + 0.8 * (self.done + max(0.0, min(1.0, fraction))) / self.total
                self.progress(f"{path.name}: {message}", overall)

        return file_progress

    def file_done(self, path: Path) -> None:
        with self.lock:
            self.done += 1
        if self.progress:
            self.progress(
                f"checked {path.name} ({self.done}/{self.total})", 0.2 + 0.8 * self.done / self.total
            )


def _apply_verified(
    per_file: dict[Path, list[Verdict]], texts: dict[Path, str], options: CheckOptions, report: Report
) -> None:
    for path, verdicts in per_file.items():
        if path not in texts:
            continue
        candidates = [
            (v, next(f for f in v.fixes if f.verified))
            for v in verdicts
            if v.status in (Status.CONFIRMED, Status.POSSIBLE) and any(f.verified for f in v.fixes)
        ]
        if not candidates:
            continue
        result = apply_fixes(texts[path], [fix for _, fix in candidates])
        applied_ids = {id(f) for f in result.applied}
        fixed = [v for v, f in candidates if id(f) in applied_ids]
        before, after = _file_texts(path, texts[path], result.applied, result.text, report)
        if after is None:
            continue
        diff = unified_diff(_display(path), before, after)
        if not diff:
            continue
        report.diffs[str(path)] = diff
        if options.fix and not options.diff:
            current = _read_text(path)
            if current != before:
                report.warnings.append(
                    f"{path}: changed on disk during the check; fixes not applied, run again"
                )
                continue
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(after)
            report.fixed.extend(fixed)
            fixed_ids = {id(v) for v in fixed}
            per_file[path] = [v for v in verdicts if id(v) not in fixed_ids]


def _file_texts(
    path: Path, before: str, applied: list[Fix], after: str, report: Report
) -> tuple[str, str | None]:
    """The file's text before and after the fixes: the program's own text, or for a notebook its
    ``.ipynb`` text with only the edited cells' sources changed (None: a fix cannot go there)."""
    notebook = report.notebooks.get(str(path))
    if notebook is None:
        return before, after
    written = notebook.apply([edit for fix in applied for edit in fix.edits])
    if written is None:
        report.warnings.append(
            f"{path}: a verified fix spans two cells or touches a magic line; not written into the "
            "notebook, apply it by hand"
        )
    return notebook.raw, written


def _display(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()
