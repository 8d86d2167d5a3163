"""The server's calls into the analysis core, run on the server's worker threads.

The core modules are imported when first used (not at server start-up) so the
editor gets static diagnostics in milliseconds and torch is never imported into
the server process by the static path. The engine itself runs the user's code in
its own subprocesses; nothing here executes user code.

The project's `[tool.grist]` policy (suppression comments, select/ignore/per-file-ignores,
the baseline, max-input-scale; `grist_lsp/policy.py`) is applied here, for the static
and the dynamic path alike, so the editor shows what `grist-lsp --check` reports.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grist_lsp.server.settings import Settings

from grist_lsp.config import ConfigError, find_pyproject, load_config
from grist_lsp.model import Fix, Site, Status, Verdict, Witness, file_error
from grist_lsp.policy import Policy, make_policy

ProgressCallback = Callable[[str, float], None]


class Cancelled(Exception):
    """A dynamic run was cancelled (a newer edit, a settings change, the user)."""


def project_policy(path: str) -> tuple[Policy | None, str]:
    """The `[tool.grist]` policy for the file at ``path``, or None and why it could not be read.

    Read on every call (a few small files): the user may edit pyproject.toml or the
    baseline at any time, and the server keeps no state outside the scheduler.
    """
    if not os.path.isabs(path) or not Path(path).parent.is_dir():
        return None, ""  # an untitled buffer: no project around it
    try:
        config = load_config(find_pyproject(Path(path)), Path(path).parent)
        return make_policy(config, config.root), ""
    except ConfigError as exc:
        return None, str(exc)


def analyze(path: str, text: str) -> list[Verdict]:
    """The static verdicts of ``text`` the project wants to see (suppressed and baselined ones left out)."""
    return _prepared(path, text, project_policy(path))


def _prepared(path: str, text: str, found: tuple[Policy | None, str]) -> list[Verdict]:
    from grist_lsp.analyzer.analysis import analyze_source

    verdicts = analyze_source(path, text)
    policy, problem = found
    if problem:
        # Shown on the file rather than only logged: the user must learn why nothing is silenced.
        return verdicts + [
            file_error(path, f"{problem}; until it is fixed, suppressions and the baseline are not applied")
        ]
    if policy is None:
        return verdicts
    return policy.before_engine(path, text, verdicts).verdicts


def warm_up() -> None:
    """Import the static pass (libcst, networkx) before the first file arrives: ~0.5 s once."""
    analyze("<warm-up>.py", "import torch\n\ny = torch.log(torch.ones(1))\n")


def module_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def engine_available() -> bool:
    return module_available("grist_lsp.dynamic.engine")


def _accepted(cls: Any, wanted: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``wanted`` that ``cls`` takes (the options grow over time)."""
    if dataclasses.is_dataclass(cls):
        names = {f.name for f in dataclasses.fields(cls)}
    else:
        names = set(inspect.signature(cls).parameters)
    return {k: v for k, v in wanted.items() if k in names}


def engine_options(settings: Settings, project_root: str | None) -> Any:
    from grist_lsp.dynamic.engine import EngineOptions

    wanted = {
        "budget": settings.budget,
        "seed": 0,
        # The machine is shared with the editor: one worker keeps typing responsive.
        "jobs": 1,
        "entries": list(settings.entries),
        "project_root": project_root,
        # The server shows reproducers on request ("Create reproducer test"); it never
        # writes files into the workspace behind the user's back.
        "write_reproducers": None,
    }
    if settings.timeout is not None:
        wanted["timeout"] = settings.timeout
    return EngineOptions(**_accepted(EngineOptions, wanted))


def needs_engine(verdicts: list[Verdict]) -> bool:
    return any(v.status is Status.POSSIBLE for v in verdicts)


def confirm_file(
    path: str,
    text: str,
    settings: Settings,
    project_root: str | None,
    progress: ProgressCallback | None,
    cancel: threading.Event,
) -> list[Verdict]:
    """Static pass, then the GRIST engine on the possible sites.

    Raises ``Cancelled`` when ``cancel`` was set: a partial answer would describe
    a text the user no longer has, or the user asked for it to stop.
    """
    if cancel.is_set():
        raise Cancelled()
    found = project_policy(path)
    # Suppressed and baselined sites are gone before the engine starts: no search time on them.
    verdicts = _prepared(path, text, found)
    if not needs_engine(verdicts):
        return verdicts
    from grist_lsp.dynamic.engine import confirm

    options = engine_options(settings, project_root)
    verdicts = confirm(path, text, verdicts, options, progress=progress, cancel=cancel)
    if cancel.is_set():
        raise Cancelled()
    policy = found[0]
    return policy.after_engine(verdicts) if policy is not None else verdicts


def fixes_available() -> bool:
    return module_available("grist_lsp.dynamic.verify")


def needs_fixes(verdicts: list[Verdict]) -> bool:
    """Only confirmed sites get engine-verified fixes; possible ones get static proposals."""
    return any(v.status is Status.CONFIRMED for v in verdicts)


def verify_fixes(
    path: str,
    text: str,
    verdicts: list[Verdict],
    settings: Settings,
    project_root: str | None,
    cancel: threading.Event,
) -> list[Verdict]:
    """``verdicts`` with re-checked fixes (each fix runs the engine again, in subprocesses)."""
    if cancel.is_set():
        raise Cancelled()  # queued behind a newer edit: not worth starting
    from grist_lsp.dynamic.verify import fix_verdicts

    return fix_verdicts(path, text, verdicts, engine_options(settings, project_root))


def propose(text: str, verdict: Verdict) -> list[Fix]:
    """Unverified rewrites for a verdict (static: no code runs), when the fixer exists."""
    if not module_available("grist_lsp.analyzer.fixes"):
        return []
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
