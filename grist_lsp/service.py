"""The one service behind the CLI and the language server: configuration, then one file's checks.

`Service.resolve` decides every option once, highest first:

1. what the caller asked for explicitly (CLI flags: `CheckOptions` fields that are not None),
2. `[tool.grist]` of the nearest pyproject.toml (re-read on every call: it is a few small files),
3. the editor's settings (`EditorSettings`; only the language server has them),
4. the table in `grist_lsp/defaults.py`.

The project file beats the editor because it is what the team and CI share: a file shows the
same findings in the editor as `grist-lsp --check` gives for it. The methods then run one
file's checks in the order both front ends need: `static` (analyzer + the project's
suppressions and baseline), `confirm` (the GRIST engine, in subprocesses), `verify_fixes`.

The engine and the fix verifier are imported inside the methods that use them, so the static
path (every keystroke in the editor, `--static-only`) never imports torch.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grist_lsp.analyzer.programs import ENTRY_CONTRACT, may_define
from grist_lsp.config import (
    FAIL_ON_CHOICES,
    ConfigError,
    GristConfig,
    find_pyproject,
    load_config,
    resolve_script,
    script_arguments,
    validate_entry,
)
from grist_lsp.defaults import MAX_DEFAULT_JOBS, default
from grist_lsp.discovery import Discovery, PathNotFound, discover
from grist_lsp.model import Fix, Status, Verdict, file_error
from grist_lsp.policy import Policy, Prepared, make_policy

if TYPE_CHECKING:
    from grist_lsp.cache import Cached, ResultCache
    from grist_lsp.dynamic.executors.spares import Spares
    from grist_lsp.dynamic.options import EngineOptions
    from grist_lsp.dynamic.sandbox import BwrapProbe
    from grist_lsp.dynamic.verify import SharedChild

ProgressFn = Callable[[str, float], None]


@dataclass
class CheckOptions:
    """What the caller asked for. None means "not said": `[tool.grist]`, the editor, then the defaults decide."""

    static_only: bool = False
    budget: float | None = None  # seconds of search per site
    seed: int | None = None
    jobs: int | None = None  # parallel worker processes (files, then sites within a file)
    entries: list[str] = field(default_factory=list)  # FILE:FUNCTION, relative to the cwd
    script_args: list[str] = field(default_factory=list)  # FILE.py=ARGS, FILE relative to the cwd
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
    baseline: str | None = None  # report only findings not in this file (over `[tool.grist] baseline`)
    write_baseline: str | None = None  # record today's findings here (any baseline is then not applied)
    max_input_scale: float | None = None  # confirmations needing inputs beyond this factor stay possible
    show_unused_suppressions: bool = False
    sandbox: str | None = None  # "auto" | "off" (--no-sandbox), over `[tool.grist] sandbox`
    executor: str | None = None  # "local" | "ray": where files are checked
    ray_address: str | None = (
        None  # the Ray cluster of the ray executor (else $RAY_ADDRESS, else a local one)
    )
    cache_dir: str | None = (
        None  # the result cache's folder (relative to the cwd), over `[tool.grist] cache-dir`
    )
    no_cache: bool = False  # neither read nor write the result cache
    cancel: threading.Event | None = None


@dataclass(frozen=True)
class EditorSettings:
    """The editor's values, below `[tool.grist]`: option name -> value, and the folder they are relative to."""

    values: Mapping[str, Any] = field(default_factory=dict)
    folder: Path | None = None  # the workspace folder: editor entries and the root without a config

    def get(self, name: str) -> Any:
        value = self.values.get(name)
        return default(name) if value is None else value


@dataclass
class Settings:
    """Every option decided, for one run."""

    config: GristConfig
    root: Path
    static_only: bool
    budget: float
    seed: int
    jobs: int
    entries: list[str]  # absolute FILE:FUNCTION
    fail_on: str
    timeout: float
    memory_mb: int
    write_reproducers: str | None
    policy: Policy
    sandbox: str = "auto"
    executor: str = "local"  # where files are checked: "local" or "ray"
    ray_address: str | None = None  # None: $RAY_ADDRESS, else a local cluster
    exclude: list[str] = field(default_factory=list)  # `[tool.grist]` exclude + the caller's
    script_args: dict[str, list[str]] = field(default_factory=dict)  # absolute script -> its arguments
    cache_dir: Path | None = None  # the result cache's folder; None: no cache (--no-cache)


def _pick(explicit: Any, configured: Any, editor: EditorSettings, name: str) -> Any:
    """The precedence of the module docstring, for one option."""
    if explicit is not None:
        return explicit
    if configured is not None:
        return configured
    return editor.get(name)


def _load(paths: list[str], options: CheckOptions, editor: EditorSettings) -> GristConfig:
    """`[tool.grist]` of --config, else of the nearest pyproject.toml above the first path."""
    start = _start(paths)
    if options.config:
        pyproject: Path | None = Path(options.config)
        if not pyproject.is_file():
            raise ConfigError(
                f"{options.config}: config file not found; pass an existing pyproject.toml to --config"
            )
    else:
        pyproject = find_pyproject(start)
    # Without a config, the root is the editor's folder, else the git work tree holding the
    # first path, else the cwd.
    folder = start if start.is_dir() else start.parent
    git_root = next((f for f in (folder, *folder.parents) if (f / ".git").exists()), None)
    default_root = Path(options.project_root) if options.project_root else (editor.folder or git_root)
    return load_config(pyproject, default_root or Path.cwd())


def _start(paths: list[str]) -> Path:
    """Where the search for pyproject.toml starts: the first path, else the folder that will hold it
    (an editor buffer not saved yet), else the cwd."""
    if not paths:
        return Path.cwd()
    first = Path(paths[0]).resolve()
    if first.exists():
        return first
    return first.parent if first.parent.is_dir() else Path.cwd()


def _check_explicit(options: CheckOptions) -> None:
    """Values a CLI caller gave that cannot be used (argparse checks types; these are ranges)."""
    if options.fail_on is not None and options.fail_on not in FAIL_ON_CHOICES:
        raise ConfigError(f"--fail-on must be one of {', '.join(FAIL_ON_CHOICES)}, got {options.fail_on!r}")
    for entry in options.entries:
        validate_entry(entry, "--entry")
    if options.budget is not None and options.budget < 0:
        raise ConfigError(f"--budget must be >= 0 seconds, got {options.budget:g}")
    if options.jobs is not None and options.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {options.jobs}")
    if options.max_input_scale is not None and not options.max_input_scale >= 1:
        raise ConfigError(f"--max-input-scale must be a factor >= 1, got {options.max_input_scale:g}")
    if options.write_baseline is not None and not Path(options.write_baseline).resolve().parent.is_dir():
        raise ConfigError(
            f"--write-baseline {options.write_baseline}: the folder does not exist; create it first"
        )


def _entries(options: CheckOptions, config: GristConfig, editor: EditorSettings) -> list[str]:
    """Every entry, absolute: CLI ones from the cwd, config ones from its folder, editor ones from the
    workspace folder. Entries add up rather than override: each names another way into the program.
    A FILE that does not exist, or that surely defines no FUNCTION, is a usage error here, before
    any code runs; what the function returns only its first run in a worker can tell."""
    editor_entries = [str(e) for e in editor.values.get("entries") or ()]
    for entry in editor_entries:
        validate_entry(entry, "grist.entries")
    where = f"{config.source}: [tool.grist] `entries`" if config.source else "[tool.grist] `entries`"
    given = [
        *((e, Path.cwd(), "--entry") for e in options.entries),
        *((e, config.root, where) for e in config.entries),
        *((e, editor.folder or config.root, "grist.entries") for e in editor_entries),
    ]
    entries = []
    for entry, base, origin in given:
        absolute = _absolute_entry(entry, base)
        file_part, _, func = absolute.rpartition(":")
        if not Path(file_part).is_file():
            raise ConfigError(
                f"{origin}: entry {entry!r}: {file_part} does not exist; fix the FILE part of FILE:FUNCTION"
            )
        try:
            text = Path(file_part).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None  # unreadable here: the worker's import says why
        if text is not None and not may_define(text, func):
            raise ConfigError(
                f"{origin}: entry {entry!r}: {file_part} defines no function {func!r} at its top level; "
                f"define it or fix the FUNCTION part ({ENTRY_CONTRACT})"
            )
        entries.append(absolute)
    return entries


def _script_args(options: CheckOptions, config: GristConfig) -> dict[str, list[str]]:
    """Each script's arguments: `[tool.grist] script-args`, then `--script-args FILE.py=ARGS` (from
    the cwd), which replaces the config's arguments of the same script."""
    out = dict(config.script_args)
    for given in options.script_args:
        script, sep, args = given.partition("=")
        where = f"--script-args {given!r}"
        if not sep or not script.strip():
            raise ConfigError(f"{where}: expected FILE.py=ARGS, like --script-args 'train.py=--epochs 1'")
        out[resolve_script(script.strip(), Path.cwd(), where)] = script_arguments(
            args, where, "--script-args 'train.py=--epochs 1'"
        )
    return out


def _absolute_entry(entry: str, base: Path) -> str:
    file_part, _, func = entry.rpartition(":")
    return f"{(base / file_part).resolve()}:{func}"


def _reproducer_folder(options: CheckOptions) -> str | None:
    if not options.write_reproducers:
        return None
    folder = Path(options.write_reproducers).resolve()
    if not options.static_only:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"--write-reproducers {options.write_reproducers}: cannot create the folder "
                f"({exc.strerror}); pass a writable folder"
            ) from exc
    return str(folder)


def resolve_settings(
    paths: list[str], options: CheckOptions, editor: EditorSettings | None = None
) -> Settings:
    """Find and validate the config, then decide every option. Raises ConfigError naming the file."""
    editor = editor or EditorSettings()
    config = _load(paths, options, editor)
    _check_explicit(options)
    root = Path(options.project_root).resolve() if options.project_root else config.root
    policy = make_policy(
        config,
        root,
        baseline=options.baseline,
        use_baseline=options.write_baseline is None,
        max_input_scale=options.max_input_scale,
    )
    jobs = options.jobs or config.jobs or max(1, min(os.cpu_count() or 1, MAX_DEFAULT_JOBS))
    return Settings(
        config=config,
        root=root,
        static_only=options.static_only,
        budget=_pick(options.budget, config.budget, editor, "budget"),
        seed=_pick(options.seed, config.seed, editor, "seed"),
        jobs=jobs,
        entries=_entries(options, config, editor),
        fail_on=_pick(options.fail_on, config.fail_on, editor, "fail_on"),
        timeout=_pick(options.timeout, config.timeout, editor, "timeout"),
        memory_mb=_pick(options.memory_mb, config.memory_mb, editor, "memory_mb"),
        write_reproducers=_reproducer_folder(options),
        policy=policy,
        sandbox=_pick(options.sandbox, config.sandbox, editor, "sandbox"),
        executor=_pick(options.executor, config.executor, editor, "executor"),
        ray_address=_pick(options.ray_address, config.ray_address, editor, "ray_address"),
        exclude=config.exclude + list(options.exclude),
        script_args=_script_args(options, config),
        cache_dir=_cache_dir(options, config, root),
    )


def _cache_dir(options: CheckOptions, config: GristConfig, root: Path) -> Path | None:
    """--no-cache, else --cache-dir (from the cwd), else `[tool.grist] cache-dir`, else the root's `.grist_cache`."""
    if options.no_cache:
        return None
    if options.cache_dir:
        return Path(options.cache_dir).resolve()
    return config.cache_dir or root / default("cache_dir")


@dataclass
class Service:
    """One run's decided settings and the checks of one file under them."""

    settings: Settings
    # Whether bubblewrap works, asked once for the whole run: every EngineOptions made here (the
    # CLI's spares and its files' searches) shares it, so the probe runs once.
    sandbox_probe: BwrapProbe | None = field(default=None, init=False, repr=False, compare=False)
    # The result cache under these settings, made on first use (None too when it is off).
    _cache: ResultCache | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def resolve(
        cls, paths: list[str], options: CheckOptions, editor: EditorSettings | None = None
    ) -> Service:
        return cls(resolve_settings(paths, options, editor))

    # --- which files -----------------------------------------------------------

    def discovery(self, force_exclude: bool = False) -> Discovery:
        config = self.settings.config
        return Discovery(
            root=self.settings.root,
            exclude=self.settings.exclude,
            include=config.include,
            force_exclude=force_exclude,
        )

    def excluded(self, path: str) -> bool:
        """Whether `[tool.grist]` (or .gitignore) excludes the file at ``path`` (an editor's open file)."""
        try:
            return not discover([path], self.discovery(force_exclude=True))
        except PathNotFound:
            return False  # an unsaved buffer: nothing on disk to match

    # --- static ----------------------------------------------------------------

    def static(self, path: str, text: str | None, on_disk: bool = False) -> Prepared:
        """The static verdicts minus what the project silenced (suppression comments read from ``text``).

        ``on_disk``: analyse the file itself (the CLI: a binary, huge or unreadable file gets its
        own error verdict), else ``text`` (an editor buffer, which may differ from the disk).
        """
        # Imported here: the server imports this module at start-up, the analyzer on its first file.
        from grist_lsp.analyzer.analysis import analyze_file, analyze_source

        try:
            verdicts = analyze_file(path) if on_disk or text is None else analyze_source(path, text)
        except Exception as exc:  # the analyzer promises not to raise; one file must not stop the run
            verdicts = [
                file_error(
                    path,
                    f"internal error in the static analyzer ({type(exc).__name__}: {exc}); "
                    "please report it with this file",
                )
            ]
        # Silenced and baselined findings leave before the engine: no search time is spent on them.
        return self.settings.policy.before_engine(path, text, verdicts)

    # --- dynamic ---------------------------------------------------------------

    def engine_options(self, jobs: int | None = None, via: str | None = None) -> EngineOptions:
        from grist_lsp.dynamic.options import EngineOptions
        from grist_lsp.dynamic.sandbox import BwrapProbe

        if self.sandbox_probe is None:
            self.sandbox_probe = BwrapProbe()
        s = self.settings
        return EngineOptions(
            budget=s.budget,
            seed=s.seed,
            jobs=jobs or s.jobs,
            entries=list(s.entries),
            script_args={k: list(v) for k, v in s.script_args.items()},
            project_root=str(s.root),
            timeout=s.timeout,
            memory_mb=s.memory_mb,
            write_reproducers=s.write_reproducers,
            via=via,
            sandbox=s.sandbox,
            sandbox_probe=self.sandbox_probe,
        )

    # --- the result cache -------------------------------------------------------

    @property
    def cache(self) -> ResultCache | None:
        """The result cache of these settings (``grist_lsp/cache.py``); None with --no-cache."""
        s = self.settings
        if self._cache is None and s.cache_dir is not None:
            from grist_lsp.cache import ResultCache, ResultOptions

            # The engine's own options, less those results do not depend on (``ResultOptions``).
            engine = self.engine_options()
            options = ResultOptions(
                **{f.name: getattr(engine, f.name) for f in fields(ResultOptions) if hasattr(engine, f.name)},
                max_input_scale=s.policy.max_input_scale,
            )
            self._cache = ResultCache(s.cache_dir, s.root, options)
        return self._cache

    def cached(self, key: str | None) -> Cached | None:
        """What ``check_file`` answered before under ``key`` (from ``cache_key``), if stored."""
        cache = self.cache
        return None if cache is None or key is None else cache.lookup(key)

    def cache_key(self, path: str, text: str, verdicts: list[Verdict], via: str | None = None) -> str | None:
        """The key of ``check_file``'s answer for this text and these static verdicts; None without a cache."""
        cache = self.cache
        return None if cache is None else cache.key(path, text, verdicts, via)

    def remember(self, key: str | None, path: str, verdicts: list[Verdict], notes: list[str]) -> str | None:
        """Store ``check_file``'s whole answer under ``key``; a warning when it cannot be written."""
        from grist_lsp.cache import Cached, cacheable

        cache = self.cache
        if cache is None or key is None or not cacheable(verdicts):
            return None
        try:
            cache.store(key, path, Cached(list(verdicts), list(notes)))
        except OSError as exc:
            return (
                f"{cache.folder}: cannot write the result cache ({exc.strerror or exc}); "
                "pass --cache-dir with a writable folder, or --no-cache"
            )
        return None

    def confirm(
        self,
        path: str,
        text: str,
        verdicts: list[Verdict],
        options: EngineOptions,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
        warm: SharedChild | None = None,
        on_confirmed: Callable[[Verdict], None] | None = None,
    ) -> list[Verdict]:
        """The engine's verdicts, witnesses beyond `max-input-scale` refused; raises ConfigError
        for an explicit entry the engine could not use.

        ``on_confirmed``: each confirmation as soon as its witness replayed (with ``warm``),
        the same policy applied, before the other sites are done."""
        from grist_lsp.dynamic import engine

        def early(verdict: Verdict) -> None:
            if on_confirmed is not None:
                for kept in self.settings.policy.after_engine([verdict]):
                    if kept.status is Status.CONFIRMED:
                        on_confirmed(kept)

        try:
            confirmed = engine.confirm(
                path,
                text,
                verdicts,
                options,
                progress=progress,
                cancel=cancel,
                warm=warm,
                on_confirmed=early,
            )
        except engine.UnusableEntry as exc:
            raise ConfigError(str(exc)) from None
        # Before fixes are verified: a refused witness needs no verified fix.
        return self.settings.policy.after_engine(list(confirmed))

    def verify_fixes(
        self,
        path: str,
        text: str,
        verdicts: list[Verdict],
        options: EngineOptions,
        warm: SharedChild | None = None,
        only: Collection[str] | None = None,
    ) -> list[Verdict]:
        """``verdicts`` with fixes attached, each re-checked by the engine (``only`` these site keys)."""
        from grist_lsp.dynamic import verify

        return list(verify.fix_verdicts(path, text, verdicts, options, warm, only))

    def check_file(
        self,
        path: str,
        text: str,
        verdicts: list[Verdict],
        options: EngineOptions,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
        spares: Spares[SharedChild] | None = None,
    ) -> tuple[list[Verdict], list[str]]:
        """Confirm, then verify fixes, in one warm child: the verdicts and warnings for stderr.
        A confirmation's fixes are checked as soon as its witness replayed, while the search of
        the file's other sites goes on (``_EarlyFixes``); the rest once the search is done.
        ``spares``: children started ahead by the caller, taken when they fit this file."""
        from grist_lsp.dynamic import engine, verify

        warnings: list[str] = []
        # One warm child replays the witnesses and then runs the fix checks: it starts with the
        # search, so no start-up waits behind it.
        shared = spares.warm_child(options, path) if spares else verify.SharedChild(options, path)
        early = _EarlyFixes(self, path, text, verdicts, options, shared, cancel)
        try:
            try:
                verdicts = self.confirm(path, text, verdicts, options, progress, cancel, shared, early.submit)
            except ConfigError:
                raise  # a wrong entry: the caller's usage error, not this file's finding
            except Exception as exc:  # keep the static verdicts; say the engine failed on this file
                return verdicts + [_engine_failed(path, exc)], warnings
            # What the sandbox refused the program, and data made up here: on stderr too.
            warnings.extend(f"{path}: {note}" for note in engine.notes_in(verdicts))
            if cancel is None or not cancel.is_set():
                checked = early.results(warnings)
                # Only a site the engine still calls confirmed keeps the fixes checked early.
                done = {
                    v.site.key: checked[v.site.key]
                    for v in verdicts
                    if v.site.key in checked and v.status is Status.CONFIRMED
                }
                try:
                    rest = self.verify_fixes(
                        path, text, verdicts, options, shared, only={v.site.key for v in verdicts} - set(done)
                    )
                except Exception as exc:  # fixes are a bonus; never lose the findings over them
                    warnings.append(f"{path}: could not verify fixes ({type(exc).__name__}: {exc})")
                    rest = verdicts
                verdicts = [
                    dataclasses.replace(v, fixes=done[v.site.key]) if v.site.key in done else v for v in rest
                ]
            return verdicts, warnings
        finally:
            early.close()  # before the warm child goes: an early check may still be using it
            shared.close()

    def spares(self, path: str) -> Spares[SharedChild]:
        """A warm child (and the fork server) started now for ``path``'s project, and the fork
        servers of the check's other files (``close`` it after the last file)."""
        from grist_lsp.dynamic.executors.spares import Spares
        from grist_lsp.dynamic.verify import SharedChild

        return Spares(self.engine_options(), path, SharedChild)

    def sandbox_warning(self, options: EngineOptions) -> str | None:
        """Why the OS sandbox is unavailable, when it is (said once per run)."""
        from grist_lsp.dynamic.executors.child import sandbox_warning

        return sandbox_warning(options)


class _EarlyFixes:
    """The fix checks of a file's confirmations, each started as soon as its witness replayed,
    one at a time, while the worker searches the file's other sites: on two cores the search
    keeps one and a confirmation's fix check (its fresh search, replay and output runs) takes the
    other, so the last site's search is what the file costs, not that search plus every fix check.

    A fix is checked against the file's other sites as settled (``verify._engine_check``): a site
    still being searched counts as possible, one confirmed later as confirmed, and both are
    settled alike, so an early check answers what the check after the search would."""

    def __init__(
        self,
        service: Service,
        path: str,
        text: str,
        static: list[Verdict],
        options: EngineOptions,
        shared: SharedChild,
        cancel: threading.Event | None,
    ) -> None:
        import concurrent.futures

        self.service, self.path, self.text, self.options, self.shared = service, path, text, options, shared
        self.cancel = cancel
        self.context = list(static)  # the static verdicts, each confirmation put in as it comes
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="grist-early-fixes"
        )
        self.pending: dict[str, concurrent.futures.Future[list[Verdict]]] = {}

    def submit(self, verdict: Verdict) -> None:
        """``verdict`` was confirmed: check its fixes now (in the background)."""
        if self.cancel is not None and self.cancel.is_set():
            return
        key = verdict.site.key
        with self.lock:
            self.context = [verdict if v.site.key == key else v for v in self.context]
            context = list(self.context)
            self.pending[key] = self.pool.submit(
                self.service.verify_fixes, self.path, self.text, context, self.options, self.shared, {key}
            )

    def results(self, warnings: list[str]) -> dict[str, list[Fix]]:
        """Site key -> its checked fixes, for every confirmation checked early; a check that
        failed is said in ``warnings`` and left to the check after the search."""
        with self.lock:
            pending = dict(self.pending)
        done: dict[str, list[Fix]] = {}
        for key, future in pending.items():
            try:
                checked = future.result()
            except Exception as exc:  # fixes are a bonus; the check after the search tries again
                warnings.append(f"{self.path}: could not verify fixes early ({type(exc).__name__}: {exc})")
                continue
            done[key] = next(v.fixes for v in checked if v.site.key == key)
        return done

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _engine_failed(path: str, exc: Exception) -> Verdict:
    return file_error(
        path,
        f"internal error in the dynamic engine ({type(exc).__name__}: {exc}); "
        "the static findings stand; please report it with this file",
    )
