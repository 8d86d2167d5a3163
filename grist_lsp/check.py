"""One orchestration API for the CLI and the language server: `check_paths`.

It resolves settings (CLI options over `[tool.grist]` over defaults), finds the
files, runs the static pass on each, drops the findings the project silenced or
baselined (`policy.py`), runs the dynamic GRIST engine on the files with open
sites (files in parallel), refuses witnesses beyond `max-input-scale`, then attaches fixes and, when asked,
applies or diffs the verified ones. A file that cannot be read, parsed or run
becomes an `error` verdict; the run goes on with the other files.

The dynamic engine and the fix verifier are imported only when used, so a
`--static-only` run never imports torch.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grist_lsp.config import (
    FAIL_ON_CHOICES,
    ConfigError,
    GristConfig,
    find_pyproject,
    load_config,
    validate_entry,
)
from grist_lsp.discovery import Discovery, discover
from grist_lsp.edits import apply_fixes, unified_diff
from grist_lsp.model import STATUS_RANK, Fix, Status, Verdict, file_error
from grist_lsp.policy import Policy, make_policy
from grist_lsp.suppressions import Suppression

ProgressFn = Callable[[str, float], None]

DEFAULT_FAIL_ON = "confirmed"
ENGINE_MODULE = "grist_lsp.dynamic.engine"
VERIFY_MODULE = "grist_lsp.dynamic.verify"
FIXES_MODULE = "grist_lsp.analyzer.fixes"
ANALYSIS_MODULE = "grist_lsp.analyzer.analysis"


@dataclass
class CheckOptions:
    """What the caller asked for. None means "use `[tool.grist]`, else the engine's default"."""

    static_only: bool = False
    budget: float | None = None  # seconds of search per site
    seed: int | None = None
    jobs: int | None = None  # parallel worker processes (files, then sites within a file)
    entries: list[str] = field(default_factory=list)  # FILE:FUNCTION, relative to the cwd
    fail_on: str | None = None  # "confirmed" | "possible"
    write_reproducers: str | None = None  # folder for pytest reproducers of confirmed bugs
    fix: bool = False  # apply verified fixes to the files
    diff: bool = False  # compute the verified fixes as a diff, write nothing
    show_safe: bool = False
    project_root: str | None = None  # overrides the config's folder as the root
    config: str | None = None  # an explicit pyproject.toml instead of the nearest one
    exclude: list[str] = field(default_factory=list)  # extra gitignore-style patterns (relative to the root)
    force_exclude: bool = False  # exclude even files named explicitly (pre-commit)
    timeout: float | None = None  # wall-clock seconds for one worker run
    memory_mb: int | None = None
    baseline: str | None = (
        None  # report only findings not in this baseline file (over `[tool.grist] baseline`)
    )
    write_baseline: str | None = None  # record today's findings here (any baseline is then not applied)
    max_input_scale: float | None = None  # confirmations needing inputs beyond this factor stay possible
    show_unused_suppressions: bool = False
    sandbox: str | None = None  # "auto" | "off" (--no-sandbox), over `[tool.grist] sandbox`
    cancel: threading.Event | None = None


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

    def failing(self) -> list[Verdict]:
        """The verdicts at or above `fail_on` (what makes the CLI exit 1)."""
        threshold = STATUS_RANK[Status(self.fail_on)]
        return [
            v for v in self.verdicts if v.status is not Status.SAFE and STATUS_RANK[v.status] >= threshold
        ]


@dataclass
class Settings:
    """CheckOptions merged with the config: every value decided."""

    config: GristConfig
    root: Path
    static_only: bool
    budget: float | None
    seed: int | None
    jobs: int
    entries: list[str]
    fail_on: str
    timeout: float | None
    memory_mb: int | None
    write_reproducers: str | None
    policy: Policy
    sandbox: str = "auto"


def resolve_settings(paths: list[str], options: CheckOptions) -> Settings:
    """Find and validate the config, then let explicit options win. Raises ConfigError."""
    start = Path(paths[0]).resolve() if paths and Path(paths[0]).exists() else Path.cwd()
    pyproject: Path | None
    if options.config:
        pyproject = Path(options.config)
        if not pyproject.is_file():
            raise ConfigError(
                f"{options.config}: config file not found; pass an existing pyproject.toml to --config"
            )
    else:
        pyproject = find_pyproject(start)
    # Without a config, the root is the git work tree holding the first path, else the cwd.
    folder = start if start.is_dir() else start.parent
    git_root = next((f for f in (folder, *folder.parents) if (f / ".git").exists()), None)
    default_root = Path(options.project_root) if options.project_root else (git_root or Path.cwd())
    config = load_config(pyproject, default_root)
    root = Path(options.project_root).resolve() if options.project_root else config.root

    fail_on = options.fail_on or config.fail_on or DEFAULT_FAIL_ON
    if fail_on not in FAIL_ON_CHOICES:
        raise ConfigError(f"--fail-on must be one of {', '.join(FAIL_ON_CHOICES)}, got {fail_on!r}")
    for entry in options.entries:
        validate_entry(entry, "--entry")
    if options.budget is not None and options.budget < 0:
        raise ConfigError(f"--budget must be >= 0 seconds, got {options.budget:g}")
    if options.jobs is not None and options.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {options.jobs}")
    # Entries become absolute: CLI ones are relative to the cwd, config ones to the config's folder.
    entries = [_absolute_entry(e, Path.cwd()) for e in options.entries]
    entries += [_absolute_entry(e, config.root) for e in config.entries]
    for entry in entries:
        file_part = entry.rpartition(":")[0]
        if not Path(file_part).is_file():
            raise ConfigError(
                f"entry {entry!r}: {file_part} does not exist; fix the FILE part of FILE:FUNCTION"
            )
    reproducers = Path(options.write_reproducers).resolve() if options.write_reproducers else None
    if reproducers is not None and not options.static_only:
        try:
            reproducers.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"--write-reproducers {options.write_reproducers}: cannot create the folder "
                f"({exc.strerror}); pass a writable folder"
            ) from exc
    if options.max_input_scale is not None and not options.max_input_scale >= 1:
        raise ConfigError(f"--max-input-scale must be a factor >= 1, got {options.max_input_scale:g}")
    if options.write_baseline is not None and not Path(options.write_baseline).resolve().parent.is_dir():
        raise ConfigError(
            f"--write-baseline {options.write_baseline}: the folder does not exist; create it first"
        )
    policy = make_policy(
        config,
        root,
        baseline=options.baseline,
        use_baseline=options.write_baseline is None,
        max_input_scale=options.max_input_scale,
    )
    jobs = options.jobs or config.jobs or max(1, min(os.cpu_count() or 1, 4))
    return Settings(
        config=config,
        root=root,
        static_only=options.static_only,
        budget=options.budget if options.budget is not None else config.budget,
        seed=options.seed if options.seed is not None else config.seed,
        jobs=jobs,
        entries=entries,
        fail_on=fail_on,
        timeout=options.timeout if options.timeout is not None else config.timeout,
        memory_mb=options.memory_mb if options.memory_mb is not None else config.memory_mb,
        write_reproducers=str(reproducers) if reproducers is not None else None,
        policy=policy,
        sandbox=options.sandbox or config.sandbox or "auto",
    )


def _absolute_entry(entry: str, base: Path) -> str:
    file_part, _, func = entry.rpartition(":")
    return f"{(base / file_part).resolve()}:{func}"


def _module_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def engine_options(settings: Settings, jobs: int) -> Any:
    """An `EngineOptions` for the dynamic engine, passing only what was decided.

    Unset values are left out so the engine's own defaults apply; fields the
    engine does not have are left out rather than guessed.
    """
    engine = importlib.import_module(ENGINE_MODULE)
    wanted = {
        "budget": settings.budget,
        "seed": settings.seed,
        "jobs": jobs,
        "entries": list(settings.entries),
        "project_root": str(settings.root),
        "timeout": settings.timeout,
        "memory_mb": settings.memory_mb,
        "write_reproducers": settings.write_reproducers,
        "sandbox": settings.sandbox,
    }
    known = {f.name for f in dataclasses.fields(engine.EngineOptions)}
    return engine.EngineOptions(**{k: v for k, v in wanted.items() if v is not None and k in known})


def _static(path: Path) -> list[Verdict]:
    analysis = importlib.import_module(ANALYSIS_MODULE)
    try:
        return list(analysis.analyze_file(str(path)))
    except Exception as exc:  # the analyzer promises not to raise; if it does, one file must not stop the run
        return [
            file_error(
                str(path),
                f"internal error in the static analyzer ({type(exc).__name__}: {exc}); "
                "please report it with this file",
            )
        ]


def _read_text(path: Path) -> str | None:
    try:
        # newline="" keeps CRLF files CRLF when --fix writes them back.
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None  # the static pass already reported why


def _has_open_sites(verdicts: list[Verdict]) -> bool:
    return any(v.status is Status.POSSIBLE for v in verdicts)


def _runnable(verdicts: list[Verdict]) -> bool:
    # A file-level error (unreadable, syntax error) has an empty op: nothing to run.
    return not any(v.status is Status.ERROR and not v.site.op for v in verdicts)


def check_paths(paths: list[str], options: CheckOptions, progress: ProgressFn | None = None) -> Report:
    """Check files and folders; raises ConfigError / discovery.PathNotFound for usage errors only."""
    started = time.monotonic()
    settings = resolve_settings(paths, options)
    discovery = Discovery(
        root=settings.root,
        exclude=settings.config.exclude + list(options.exclude),
        include=settings.config.include,
        force_exclude=options.force_exclude,
    )
    files = discover(paths or ["."], discovery)
    report = Report(
        verdicts=[],
        stats={},
        root=_repo_root(settings.root),
        fail_on=settings.fail_on,
        files=[str(f) for f in files],
    )
    if not files:
        report.warnings.append(f"no Python files found under {', '.join(paths or ['.'])}")

    per_file: dict[Path, list[Verdict]] = {}
    texts: dict[Path, str] = {}
    suppressed = baselined = 0
    for index, path in enumerate(files):
        if options.cancel is not None and options.cancel.is_set():
            break
        if progress:
            progress(
                f"static {path.name}", index / max(1, len(files)) * (0.2 if not settings.static_only else 1.0)
            )
        text = _read_text(path)
        if text is not None:
            texts[path] = text
        # Silenced and baselined findings leave before the engine: no search time is spent on them.
        prepared = settings.policy.before_engine(str(path), text, _static(path))
        per_file[path] = prepared.verdicts
        suppressed += prepared.suppressed
        baselined += prepared.baselined
        if options.show_unused_suppressions:
            report.unused_suppressions.extend((str(path), s) for s in prepared.unused)

    dynamic_ran = False
    if not settings.static_only:
        if _module_available(ENGINE_MODULE):
            run_by = _modules_run_by(files, texts, per_file, settings)
            todo = [
                p
                for p in [*files, *run_by]
                if p in per_file and p in texts and _runnable(per_file[p]) and _has_open_sites(per_file[p])
            ]
            _run_dynamic(todo, per_file, texts, settings, options, progress, report.warnings, run_by)
            for module in run_by:
                # Only what the checked program was seen to break there: the module itself was not named.
                per_file[module] = [v for v in per_file[module] if v.status is Status.CONFIRMED]
            dynamic_ran = True
        else:
            report.warnings.append(
                "the dynamic engine (grist_lsp.dynamic.engine) is not installed; ran the static pass only"
            )

    # Without the engine (or its verifier) fixes are offered unverified. Static-only runs
    # offer none: proposing them re-parses the file per site (seconds on a large file),
    # and none of them could be verified anyway.
    if not settings.static_only and not (dynamic_ran and _module_available(VERIFY_MODULE)):
        _propose_fixes(per_file, texts, report)

    if options.fix or options.diff:
        _apply_verified(per_file, texts, options, report)

    verdicts = [v for vs in per_file.values() for v in vs]
    verdicts.sort(key=lambda v: (v.site.file, v.site.span.start_line, v.site.span.start_col, v.site.op))
    report.verdicts = verdicts
    counts = {s.value: 0 for s in Status}
    for v in verdicts:
        counts[v.status.value] += 1
    report.stats = {
        "files": len(files),
        **counts,
        "fixed": len(report.fixed),
        "suppressed": suppressed,
        "baselined": baselined,
        "dynamic": dynamic_ran,
        "budget": settings.budget,
        "seed": settings.seed,
        "jobs": settings.jobs,
        "seconds": round(time.monotonic() - started, 3),
    }
    if options.write_baseline is not None:
        _write_baseline(Path(options.write_baseline), verdicts, settings.root)
        report.baseline_written = options.write_baseline
    if progress:
        progress("done", 1.0)
    return report


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


def _modules_run_by(
    files: list[Path], texts: dict[Path, str], per_file: dict[Path, list[Verdict]], settings: Settings
) -> dict[Path, Path]:
    """The project modules that a checked test or script imports and that were not checked
    themselves -> that program. Their open sites join the dynamic run, entered through it alone
    (``EngineOptions.via``), so a bug two files away is reported at its own file and line."""
    from grist_lsp.analyzer.programs import is_script, is_test_file
    from grist_lsp.discovery import imported_modules

    run_by: dict[Path, Path] = {}
    for program in files:
        text = texts.get(program)
        if text is None or not (is_test_file(program.name) or is_script(text)):
            continue
        for module in imported_modules(program, text, settings.root):
            if module in per_file or module in run_by:
                continue
            module_text = _read_text(module)
            if module_text is None:
                continue
            prepared = settings.policy.before_engine(str(module), module_text, _static(module))
            if _has_open_sites(prepared.verdicts):
                per_file[module], texts[module], run_by[module] = prepared.verdicts, module_text, program
    return run_by


def _run_dynamic(
    todo: list[Path],
    per_file: dict[Path, list[Verdict]],
    texts: dict[Path, str],
    settings: Settings,
    options: CheckOptions,
    progress: ProgressFn | None,
    warnings: list[str],
    run_by: dict[Path, Path] | None = None,
) -> None:
    """Confirm open sites, then verify fixes, one file per thread (workers are subprocesses)."""
    if not todo:
        return
    engine = importlib.import_module(ENGINE_MODULE)
    verify = importlib.import_module(VERIFY_MODULE) if _module_available(VERIFY_MODULE) else None
    # The rewrites (libcst, a second of imports) are needed once the first search ends: import them
    # while this process only waits for the workers.
    threading.Thread(
        target=importlib.import_module, args=(FIXES_MODULE,), name="grist-import-fixes", daemon=True
    ).start()
    # Parallel across files first (separate programs share nothing); the engine
    # gets the remaining workers for its sites when there are fewer files than jobs.
    file_workers = min(settings.jobs, len(todo))
    engine_jobs = max(1, settings.jobs // file_workers)
    opts = engine_options(settings, engine_jobs)
    sandbox_warning = engine.sandbox_warning(opts)  # the OS sandbox unavailable: say so and why
    if sandbox_warning:
        warnings.append(sandbox_warning)
    done = 0
    lock = threading.Lock()
    # Our own event too, so Ctrl-C can stop the engine's workers even when the caller gave none.
    cancel = options.cancel or threading.Event()

    def one(path: Path) -> tuple[Path, list[Verdict]]:
        file_opts = dataclasses.replace(opts, via=str(run_by[path])) if run_by and path in run_by else opts
        # One warm child replays the witnesses and then runs the fix checks: it starts with the
        # search, so no start-up waits behind it.
        shared = verify.SharedChild(file_opts, str(path)) if verify is not None else None

        def file_progress(message: str, fraction: float) -> None:
            if progress:
                with lock:
                    overall = 0.2 + 0.8 * (done + max(0.0, min(1.0, fraction))) / len(todo)
                progress(f"{path.name}: {message}", overall)

        try:
            try:
                verdicts = list(
                    engine.confirm(
                        str(path),
                        texts[path],
                        per_file[path],
                        file_opts,
                        progress=file_progress,
                        cancel=cancel,
                        warm=shared,
                    )
                )
                # Before fixes are verified: a refused witness needs no verified fix.
                verdicts = settings.policy.after_engine(verdicts)
                blocked = engine.blocked_in(verdicts)  # what the sandbox refused the program, on stderr too
                if blocked:
                    with lock:
                        warnings.append(f"{path}: {blocked}")
            except Exception as exc:  # keep the static verdicts; say the engine failed on this file
                err = file_error(
                    str(path),
                    f"internal error in the dynamic engine ({type(exc).__name__}: {exc}); "
                    "the static findings stand; please report it with this file",
                )
                return path, per_file[path] + [err]
            # Verify this file's fixes in the same thread, so one file's fix checks overlap
            # the other files' searches instead of waiting for all of them.
            if verify is not None and not cancel.is_set():
                try:
                    verdicts = list(verify.fix_verdicts(str(path), texts[path], verdicts, file_opts, shared))
                except Exception as exc:  # fixes are a bonus; never lose the findings over them
                    with lock:
                        warnings.append(f"{path}: could not verify fixes ({type(exc).__name__}: {exc})")
            return path, verdicts
        finally:
            if shared is not None:
                shared.close()

    pool = ThreadPoolExecutor(max_workers=file_workers, thread_name_prefix="grist-file")
    try:
        futures = [pool.submit(one, p) for p in todo]
        for future in as_completed(futures):
            path, verdicts = future.result()
            per_file[path] = verdicts
            with lock:
                done += 1
            if progress:
                progress(f"checked {path.name} ({done}/{len(todo)})", 0.2 + 0.8 * done / len(todo))
    except BaseException:
        # Ctrl-C (or any failure here): tell running searches to kill their workers, start no more.
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _propose_fixes(per_file: dict[Path, list[Verdict]], texts: dict[Path, str], report: Report) -> None:
    """The analyzer's proposed rewrites, marked unverified, for open and confirmed sites."""
    if not _module_available(FIXES_MODULE):
        return
    fixes = importlib.import_module(FIXES_MODULE)
    for path, verdicts in per_file.items():
        if path not in texts:
            continue
        try:
            for verdict in verdicts:
                if verdict.status in (Status.CONFIRMED, Status.POSSIBLE) and not verdict.fixes:
                    verdict.fixes = [_unverified(f) for f in fixes.propose_fixes(texts[path], verdict)]
        except Exception as exc:  # fixes are a bonus; never lose the findings over them
            report.warnings.append(f"{path}: could not propose fixes ({type(exc).__name__}: {exc})")


def _unverified(fix: Fix) -> Fix:
    return dataclasses.replace(fix, verified=False)


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
        diff = unified_diff(_display(path), texts[path], result.text)
        if not diff:
            continue
        report.diffs[str(path)] = diff
        if options.fix and not options.diff:
            current = _read_text(path)
            if current != texts[path]:
                report.warnings.append(
                    f"{path}: changed on disk during the check; fixes not applied, run again"
                )
                continue
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(result.text)
            report.fixed.extend(fixed)
            fixed_ids = {id(v) for v in fixed}
            per_file[path] = [v for v in verdicts if id(v) not in fixed_ids]


def _display(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()
