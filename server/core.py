"""The server's calls into the one service (`grist_lsp/service.py`), run on its worker threads.

Each call resolves the file's settings again through the service: `[tool.grist]` of the
nearest pyproject.toml over the editor's ``grist.*`` values over the defaults table, the same
precedence `grist-lsp --check` uses, so the editor shows what the CLI reports (suppressions,
select/ignore/per-file-ignores, the baseline, max-input-scale, exclude, entries, budget,
seed, timeout). Reading it is a few small files; it is re-read per call, so an edited
pyproject.toml applies from the next check on (the server also re-runs the open files when
the client reports the change).

The analyzer is imported when first used (not at server start-up) so the editor gets
static diagnostics in milliseconds and torch is never imported into the server process by
the static path. The engine runs the user's code in its own subprocesses; nothing here
executes user code.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from grist_lsp.config import ConfigError
from grist_lsp.model import Fix, Site, Status, Verdict, Witness, file_error
from grist_lsp.server.settings import Settings
from grist_lsp.service import CheckOptions, EditorSettings, Service

if TYPE_CHECKING:
    from grist_lsp.dynamic.verify import SharedChild

ProgressCallback = Callable[[str, float], None]

# The machine is shared with the editor: one engine worker keeps typing responsive.
SERVER_JOBS = 1


class Cancelled(Exception):
    """A dynamic run was cancelled (a newer edit, a settings change, the user)."""


def service_for(path: str, settings: Settings, folder: str | None) -> Service:
    """The service for the file at ``path`` (raises ConfigError naming pyproject.toml and the key)."""
    editor = EditorSettings(settings.editor_values(), Path(folder) if folder else None)
    # The server shows reproducers on request ("Create reproducer test"); it never writes
    # files into the workspace behind the user's back, so no write_reproducers here.
    return Service.resolve([path], CheckOptions(), editor)


def _in_project(path: str) -> bool:
    return os.path.isabs(path) and Path(path).parent.is_dir()  # else an untitled buffer


def analyze(path: str, text: str, settings: Settings, folder: str | None) -> list[Verdict]:
    """The static verdicts of ``text`` the project wants to see (suppressed, baselined and
    excluded ones left out)."""
    from grist_lsp.analyzer.analysis import analyze_source

    if not _in_project(path):
        return analyze_source(path, text)
    try:
        service = service_for(path, settings, folder)
    except ConfigError as exc:
        # Shown on the file rather than only logged: the user must learn why nothing is silenced.
        problem = f"{exc}; until it is fixed, [tool.grist] (suppressions, the baseline ...) is not applied"
        return analyze_source(path, text) + [file_error(path, problem)]
    if service.excluded(path):
        return []  # `grist-lsp --check` skips it too
    return service.static(path, text).verdicts


def warm_up() -> None:
    """Import the static pass (libcst, networkx) before the first file arrives: ~0.5 s once."""
    analyze("<warm-up>.py", "import torch\n\ny = torch.log(torch.ones(1))\n", Settings(), None)


def needs_engine(verdicts: list[Verdict]) -> bool:
    return any(v.status is Status.POSSIBLE for v in verdicts)


def confirm_file(
    path: str,
    text: str,
    settings: Settings,
    folder: str | None,
    progress: ProgressCallback | None,
    cancel: threading.Event,
    warm: SharedChild | None = None,
    on_confirmed: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Static pass, then the GRIST engine on the possible sites.

    Raises ``Cancelled`` when ``cancel`` was set: a partial answer would describe
    a text the user no longer has, or the user asked for it to stop. ``warm`` (see
    ``warm_child``) replays the witnesses, each confirmation going to ``on_confirmed`` at once.
    """
    if cancel.is_set():
        raise Cancelled()
    try:
        service = service_for(path, settings, folder)
    except ConfigError:
        return analyze(path, text, settings, folder)  # says what is wrong; no code runs on a bad config
    if service.excluded(path):
        return []
    verdicts = service.static(path, text).verdicts
    if not needs_engine(verdicts):
        return verdicts
    options = service.engine_options(jobs=SERVER_JOBS)
    try:
        verdicts = service.confirm(path, text, verdicts, options, progress, cancel, warm, on_confirmed)
    except ConfigError as exc:  # an entry that cannot be used: said on the file, as a bad config is
        return verdicts + [file_error(path, str(exc))]
    if cancel.is_set():
        raise Cancelled()
    return verdicts


def _engine_input(
    path: str, text: str, settings: Settings, folder: str | None
) -> tuple[Service, list[Verdict]] | None:
    """The service and the static verdicts the engine would get for ``text``; None when it would get none."""
    if not _in_project(path):
        return None
    try:
        service = service_for(path, settings, folder)
    except ConfigError:
        return None
    if service.excluded(path):
        return None
    verdicts = service.static(path, text).verdicts
    return (service, verdicts) if needs_engine(verdicts) else None


def cached_answer(path: str, text: str, settings: Settings, folder: str | None) -> list[Verdict] | None:
    """The answer a check of this text gave before (``grist-lsp --check`` or an earlier session),
    from the project's result cache; None when none is stored. Runs nothing."""
    given = _engine_input(path, text, settings, folder)
    if given is None:
        return None
    service, verdicts = given
    hit = service.cached(service.cache_key(path, text, verdicts))
    return None if hit is None else hit.verdicts


def remember(
    path: str, text: str, settings: Settings, folder: str | None, verdicts: list[Verdict]
) -> str | None:
    """Store a whole answer (every confirmed and possible site's fixes checked, as ``check_file``
    does) in the project's result cache; a warning when it cannot be written."""
    given = _engine_input(path, text, settings, folder)
    if given is None:
        return None
    service, static = given
    return service.remember(service.cache_key(path, text, static), path, verdicts, [])


def needs_fixes(verdicts: list[Verdict]) -> bool:
    """Only confirmed sites get engine-verified fixes; possible ones get static proposals."""
    return any(v.status is Status.CONFIRMED for v in verdicts)


def verify_fixes(
    path: str,
    text: str,
    verdicts: list[Verdict],
    settings: Settings,
    folder: str | None,
    cancel: threading.Event,
    warm: SharedChild | None = None,
    only: Collection[str] | None = None,
) -> list[Verdict]:
    """``verdicts`` with re-checked fixes (each fix runs the engine again, in subprocesses);
    in ``warm``, the child that replayed the witnesses, when given; ``only`` these site keys."""
    if cancel.is_set():
        raise Cancelled()  # queued behind a newer edit: not worth starting
    service = service_for(path, settings, folder)
    return service.verify_fixes(path, text, verdicts, service.engine_options(jobs=SERVER_JOBS), warm, only)


def warm_child(path: str, settings: Settings, folder: str | None) -> SharedChild | None:
    """A child for one run's replays and then its fix checks (one torch start-up for both);
    the caller closes it. None when the project's configuration cannot be read."""
    from grist_lsp.dynamic.verify import SharedChild

    try:
        service = service_for(path, settings, folder)
    except ConfigError:
        return None
    return SharedChild(service.engine_options(jobs=SERVER_JOBS), path)


def propose(text: str, verdict: Verdict) -> list[Fix]:
    """Unverified rewrites for a verdict (static: no code runs)."""
    from grist_lsp.analyzer.fixes import propose_fixes

    return list(propose_fixes(text, verdict))


@dataclasses.dataclass
class ReproducerFiles:
    """What "Create reproducer test" writes: a pytest file and binary payloads by name."""

    filename: str
    source: str
    payloads: dict[str, bytes]


def reproducer(
    site: Site, witness: Witness, directory: str, taken: Callable[[Path], bool]
) -> ReproducerFiles:
    """Render (not write) the reproducer for a file that will live in ``directory``, under the
    first of ``test_grist_...py``, ``..._2.py`` ... that ``taken`` says is free (its payloads
    are named after it, so they never overwrite another test's)."""
    from grist_lsp.dynamic.reproducer import render_reproducer, reproducer_filename
    from grist_lsp.server.actions import free_name

    target = free_name(Path(directory), reproducer_filename(site), exists=taken)
    rendered = render_reproducer(site, witness, directory, target.name)
    return ReproducerFiles(
        filename=rendered.filename, source=rendered.source, payloads=dict(rendered.payloads)
    )


def internal_error(path: str, exc: BaseException) -> Verdict:
    """An error verdict that names the file and says what to do."""
    return file_error(
        path,
        f"grist could not check this file ({type(exc).__name__}: {exc}); see the GRIST output for details",
    )
