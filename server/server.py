"""The grist language server: pygls wiring, handlers, publishing, and ``main()``.

State lives on the ``GristServer`` instance (settings, open documents, what was
published, the scheduler). Handlers are module-level functions in the pygls style (the
server is their first argument); ``create_server`` registers them from ``FEATURES`` and
``COMMANDS`` on a fresh instance, so several servers can live in one process (tests).
What a file's checks are is not decided here: ``core.py`` asks the one service.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import os
import signal
import sys
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from grist_lsp import __version__
from grist_lsp.model import Status, Verdict
from grist_lsp.server import actions, core, diagnostics
from grist_lsp.server.notebook_cells import (
    NOTEBOOK_SYNC,
    OpenNotebook,
    cell_diagnostics,
    in_cells,
    read_open_notebook,
    script_range,
)
from grist_lsp.server.scheduler import Scheduler, Snapshot
from grist_lsp.server.settings import DYNAMIC_FIELDS, Settings, client_trust, merge_settings

CONFIG_FILE = "pyproject.toml"  # where [tool.grist] lives; the server re-runs open files when one changes
CLIENT_REQUEST_TIMEOUT = 10.0  # seconds to wait for the client's configuration/progress answers


class ProgressReporter:
    """Work-done progress of one engine run. A token is used once, then forgotten."""

    def __init__(self, server: GristServer, token: str | None) -> None:
        self.server = server
        self.token = token
        self._loop = asyncio.get_running_loop()
        self._last_percentage = -1
        self._ended = False

    def report_threadsafe(self, message: str, fraction: float) -> None:
        """The engine's ``progress(message, fraction)`` callback, called from its thread."""
        if self.token is None or self._ended:
            return
        try:
            self._loop.call_soon_threadsafe(self._report, str(message), float(fraction))
        except RuntimeError:
            pass  # the loop is closing: the server is shutting down

    def _report(self, message: str, fraction: float) -> None:
        if self.token is None or self._ended:
            return
        percentage = max(0, min(100, int(fraction * 100)))
        self._last_percentage = max(self._last_percentage, percentage)
        self.server.work_done_progress.report(
            self.token,
            types.WorkDoneProgressReport(message=message, percentage=self._last_percentage),
        )

    def end(self, outcome: str) -> None:
        if self.token is None or self._ended:
            return
        self._ended = True
        self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=outcome))
        self.server.work_done_progress.tokens.pop(self.token, None)


class GristServer(LanguageServer):
    """The language server and everything it knows about the session."""

    def __init__(self) -> None:
        super().__init__(
            "grist-lsp",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.settings = Settings()
        self.client_trusted = True
        self.config_ready = False
        self.open_uris: set[str] = set()
        # uri -> (version, text hash, what was published): code actions read this.
        self.published: dict[str, tuple[int | None, str, list[diagnostics.Published]]] = {}
        self.scheduler = Scheduler(self)
        self.shutdown_requested = False
        self._logging = False
        # Pull model (LSP 3.17): the client asks with textDocument/diagnostic and is told to ask
        # again (workspace/diagnostic/refresh) when an engine run lands; else we push.
        self.pull_diagnostics = False
        self.served: dict[str, str] = {}  # uri -> result id the client last pulled
        self._refresh_scheduled = False
        self._notebooks: dict[str, OpenNotebook] = {}  # notebook uri -> its script, at its last version

    # --- client capabilities ---------------------------------------------------

    def _capability(self, path: str) -> Any:
        node: Any = self.client_capabilities
        for part in path.split("."):
            node = getattr(node, part, None) if node is not None else None
        return node

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        return getattr(encoding, "value", encoding)

    # --- documents ---------------------------------------------------------------

    def snapshot(self, uri: str) -> Snapshot | None:
        """The current text of an open document, or None if it is not open."""
        if uri not in self.open_uris:
            return None
        can_run = uri.startswith("file:")
        path = _path_of(uri)
        notebook = self.open_notebook(uri)
        if notebook is not None:  # the script of its code cells is what is checked
            return Snapshot(
                uri, path, notebook.version, notebook.notebook.script, self.root_for(path), can_run
            )
        doc = self.workspace.get_text_document(uri)
        return Snapshot(
            uri=uri,
            path=path,
            version=doc.version,
            text=doc.source,
            root=self.root_for(path),
            can_run=can_run,
        )

    def open_notebook(self, uri: str) -> OpenNotebook | None:
        """The open notebook ``uri`` at its current version (None: not a notebook)."""
        document = self.workspace.get_notebook_document(notebook_uri=uri)
        if document is None:
            self._notebooks.pop(uri, None)
            return None
        known = self._notebooks.get(uri)
        if known is None or known.version != document.version:
            known = read_open_notebook(self.workspace, uri, _path_of(uri))
            if known is None:
                return None
            self._notebooks[uri] = known
        return known

    def notebook_of_cell(self, cell_uri: str) -> OpenNotebook | None:
        """The open notebook one of whose cells is the text document ``cell_uri``."""
        document = self.workspace.get_notebook_document(cell_uri=cell_uri)
        return (
            None
            if document is None or document.uri not in self.open_uris
            else self.open_notebook(document.uri)
        )

    def opened(self, uri: str) -> None:
        """A document (a file, or a notebook) was opened: check it now."""
        self.open_uris.add(uri)
        self.scheduler.kick_static(uri)
        self.scheduler.schedule_dynamic(uri, 0.0)

    def changed(self, uri: str) -> None:
        """A new version of an open document: the static pass now, the engine once edits pause."""
        self.scheduler.kick_static(uri)
        self.scheduler.text_changed(uri)
        self.scheduler.schedule_dynamic(uri, self.settings.debounce)

    def closed(self, uri: str) -> None:
        """A document was closed: its runs stop and what was published for it is forgotten."""
        self.scheduler.close(uri)
        self.open_uris.discard(uri)
        self.published.pop(uri, None)
        self.served.pop(uri, None)

    def root_for(self, path: str) -> str | None:
        """The workspace folder holding ``path`` (longest match), else the file's directory."""

        def holds(folder: str | None) -> bool:
            return bool(folder) and (path == folder or path.startswith(folder.rstrip("/") + "/"))

        folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()] + [self.workspace.root_path]
        inside = [f for f in folders if f and holds(f)]
        if inside:
            return max(inside, key=len)
        # A file outside every folder: its own directory is the project.
        return str(Path(path).parent) if path else None

    def dynamic_allowed(self, snap: Snapshot) -> bool:
        """Never run the user's code unless every switch says yes."""
        return snap.can_run and self.settings.dynamic_allowed(self.client_trusted)

    def current_diagnostics(self, uri: str) -> tuple[Snapshot, list[diagnostics.Published]] | None:
        """The diagnostics of the current text of ``uri`` (remembered for code actions), or None
        while its static pass has not finished."""
        snap = self.snapshot(uri)
        if snap is None:
            return None
        verdicts = self.scheduler.verdicts_for(snap)
        if verdicts is None:
            return None
        notebook = self.open_notebook(uri)
        if notebook is not None:  # the cells left out (not Python), at their cells, as the CLI says
            verdicts = notebook.notebook.cell_errors() + verdicts
        published = diagnostics.build(
            verdicts, snap.text, self.encoding, self.settings, document_path=snap.path, root=snap.root
        )
        self.published[uri] = (snap.version, snap.hash, published)
        return snap, published

    def publish(self, uri: str) -> None:
        """New results for ``uri``: push them, or (pull model) ask the client to pull again."""
        current = self.current_diagnostics(uri)
        if current is None:
            return  # the static pass of this text has not finished: keep what is shown
        snap, published = current
        notebook = self.open_notebook(uri)
        if notebook is not None:
            # Cells are pushed to: a client pulls for the documents it opened, and a notebook's
            # cells are not opened as text documents of their own.
            for cell_uri, items in cell_diagnostics(notebook, published).items():
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(
                        uri=cell_uri, diagnostics=items, version=notebook.cell_versions.get(cell_uri)
                    )
                )
            return
        if self.pull_diagnostics:
            if self.served.get(uri) != diagnostics.result_id(snap.hash, published):
                self.request_refresh()
            return
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[p.diagnostic for p in published], version=snap.version
            )
        )

    def request_refresh(self) -> None:
        """``workspace/diagnostic/refresh``, once for a burst of results (it re-pulls every open file)."""
        if self._refresh_scheduled or not self._capability("workspace.diagnostics.refresh_support"):
            return
        self._refresh_scheduled = True

        async def refresh() -> None:
            self._refresh_scheduled = False
            try:
                await asyncio.wait_for(self.workspace_diagnostic_refresh_async(None), CLIENT_REQUEST_TIMEOUT)
            except Exception as exc:
                self.log(
                    f"workspace/diagnostic/refresh failed ({exc}); diagnostics update on the next edit",
                    types.MessageType.Warning,
                )

        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(refresh()))

    async def pull(self, uri: str, previous_result_id: str | None) -> types.DocumentDiagnosticReport:
        """Answer ``textDocument/diagnostic``: the current diagnostics, waiting for the static pass."""
        current = None
        while self.snapshot(uri) is not None and current is None:
            await self.scheduler.static_ready(uri)
            current = self.current_diagnostics(uri)
        if current is None:  # not open (or closed meanwhile): nothing to say about it
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        snap, published = current
        result_id = diagnostics.result_id(snap.hash, published)
        self.served[uri] = result_id
        if previous_result_id == result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return types.RelatedFullDocumentDiagnosticReport(
            items=[p.diagnostic for p in published], result_id=result_id
        )

    def find_verdict(self, uri: str, key: str) -> Verdict | None:
        """The verdict with site ``key`` as published for the current text of ``uri``."""
        snap = self.snapshot(uri)
        entry = self.published.get(uri)
        if snap is None or entry is None or entry[1] != snap.hash:
            return None
        return next((p.verdict for p in entry[2] if p.verdict.site.key == key), None)

    # --- settings ----------------------------------------------------------------

    def apply_payload(self, payload: Any) -> None:
        """Apply a settings payload (and the client's trust statement, if it makes one)."""
        trusted = client_trust(payload)
        self.apply_settings(
            merge_settings(self.settings, payload), self.client_trusted if trusted is None else trusted
        )

    def apply_settings(self, new: Settings, trusted: bool) -> None:
        old, self.settings = self.settings, new
        old_trusted, self.client_trusted = self.client_trusted, trusted
        if old == new and old_trusted == trusted:
            return
        if old_trusted != trusted or any(getattr(old, f) != getattr(new, f) for f in DYNAMIC_FIELDS):
            # Runs started under the old settings may no longer be allowed or wanted.
            self.scheduler.cancel_all()
        self.log(f"settings: {new}; workspace trusted: {trusted}")
        for uri in sorted(self.open_uris):
            self.publish(uri)
            self.scheduler.schedule_dynamic(uri, 0.0)

    async def register_configuration_changes(self) -> None:
        """Ask to be told when ``grist.*`` changes (clients that register dynamically)."""
        if self._capability("workspace.did_change_configuration.dynamic_registration"):
            await self._register(types.WORKSPACE_DID_CHANGE_CONFIGURATION, {"section": "grist"})

    async def register_config_file_watcher(self) -> None:
        """Ask to be told when a pyproject.toml changes: `[tool.grist]` decides what is shown."""
        if self._capability("workspace.did_change_watched_files.dynamic_registration"):
            watcher = types.FileSystemWatcher(glob_pattern=f"**/{CONFIG_FILE}")
            await self._register(
                types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                types.DidChangeWatchedFilesRegistrationOptions(watchers=[watcher]),
            )

    async def _register(self, method: str, options: Any) -> None:
        registration = types.Registration(id=str(uuid.uuid4()), method=method, register_options=options)
        try:
            await asyncio.wait_for(
                self.client_register_capability_async(types.RegistrationParams(registrations=[registration])),
                CLIENT_REQUEST_TIMEOUT,
            )
        except Exception as exc:
            self.log(
                f"client/registerCapability {method} failed ({exc}); such changes need a restart",
                types.MessageType.Warning,
            )

    async def pull_configuration(self) -> None:
        """Ask the client for the ``grist`` section, when it can answer."""
        if not self._capability("workspace.configuration"):
            return
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="grist")])
                ),
                CLIENT_REQUEST_TIMEOUT,
            )
        except Exception as exc:
            self.log_exception("workspace/configuration failed; keeping the current settings", exc)
            return
        if result and isinstance(result[0], dict):
            self.apply_payload(result[0])

    # --- progress and logging ----------------------------------------------------

    async def begin_progress(self, title: str, cancel: Any) -> ProgressReporter:
        """Create a fresh token and begin; falls back to silence if the client cannot show it."""
        if not self._capability("window.work_done_progress"):
            return ProgressReporter(self, None)
        token = f"grist/{uuid.uuid4()}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), CLIENT_REQUEST_TIMEOUT)
        except Exception as exc:
            self.log_exception("window/workDoneProgress/create failed", exc)
            return ProgressReporter(self, None)
        self.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=title, cancellable=True, message="searching for a failing input", percentage=0
            ),
        )
        future = self.work_done_progress.tokens.get(token)
        if future is not None:
            # The user pressed "cancel" on the progress notification: stop the workers.
            future.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
        return ProgressReporter(self, token)

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        if self._logging or self.shutdown_requested:
            return  # a failure while reporting a failure (closed pipe): do not loop
        self._logging = True
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:
            pass  # no client to tell: nothing else to do
        finally:
            self._logging = False

    def log_exception(self, context: str, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.log(f"{context}: {exc}\n{text}", types.MessageType.Error)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls' default pops up a message box; a log line is enough and never blocks.
        self.log(
            f"grist-lsp internal error ({getattr(source, '__name__', source)}): {error}",
            types.MessageType.Error,
        )


def _path_of(uri: str) -> str:
    """The file a document's URI names; an unsaved buffer's URI (``untitled:``) stands for itself."""
    return (to_fs_path(uri) if uri.startswith("file:") else None) or unquote(uri)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Log a handler's exception to the client instead of losing it."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(ls: GristServer, *args: Any) -> Any:
            try:
                return await fn(ls, *args)
            except Exception as exc:
                ls.log_exception(f"{fn.__name__} failed", exc)
                return None

        return run_async

    @functools.wraps(fn)
    def run(ls: GristServer, *args: Any) -> Any:
        try:
            return fn(ls, *args)
        except Exception as exc:
            ls.log_exception(f"{fn.__name__} failed", exc)
            return None

    return run


def _uri_argument(args: tuple[Any, ...]) -> str | None:
    """Commands get ``[uri]``, ``[{"uri": ...}]`` or nothing, depending on the client."""
    for arg in args:
        if isinstance(arg, list) and arg:
            return _uri_argument(tuple(arg))
        if isinstance(arg, str) and ":" in arg:
            return arg
        if isinstance(arg, dict) and isinstance(arg.get("uri"), str):
            return arg["uri"]
    return None


# --- handlers (pygls style: module-level functions taking the server first) ---


@guarded
def initialize(ls: GristServer, params: types.InitializeParams) -> None:
    # Fail closed: should reading the options go wrong, no code runs.
    ls.client_trusted = False
    ls.scheduler.warm_up()
    ls.pull_diagnostics = ls._capability("text_document.diagnostic") is not None
    options = params.initialization_options
    trusted = client_trust(options)
    ls.client_trusted = True if trusted is None else trusted
    ls.settings = merge_settings(ls.settings, options)


@guarded
async def initialized(ls: GristServer, params: types.InitializedParams) -> None:
    try:
        await ls.register_configuration_changes()
        await ls.register_config_file_watcher()
        await ls.pull_configuration()
    finally:
        ls.config_ready = True
        if not ls.client_trusted:
            ls.log("the workspace is not trusted: static analysis only, no code is run")
        for uri in sorted(ls.open_uris):
            ls.publish(uri)
            ls.scheduler.schedule_dynamic(uri, 0.0)


@guarded
async def did_change_configuration(ls: GristServer, params: types.DidChangeConfigurationParams) -> None:
    if isinstance(params.settings, dict):
        ls.apply_payload(params.settings)
    # Pull as well: VS Code sends null settings under the pull model.
    await ls.pull_configuration()


@guarded
def did_change_watched_files(ls: GristServer, params: types.DidChangeWatchedFilesParams) -> None:
    changed = [c.uri for c in params.changes if c.uri.rsplit("/", 1)[-1] == CONFIG_FILE]
    if changed:
        ls.log(f"{', '.join(changed)} changed: checking the open files again")
        ls.scheduler.config_changed()


@guarded
def did_open(ls: GristServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    if ls.workspace.get_notebook_document(cell_uri=uri) is not None:
        return  # a cell of a synced notebook: checked with the notebook, never on its own
    ls.opened(uri)


@guarded
def did_change(ls: GristServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@guarded
def did_save(ls: GristServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.scheduler.schedule_dynamic(params.text_document.uri, 0.0)


@guarded
def did_close(ls: GristServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.closed(uri)
    if not ls.pull_diagnostics:  # a pulling client drops a closed file's diagnostics itself
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# A notebook is one document to the scheduler (its URI, the script of its code cells).


@guarded
def notebook_did_open(ls: GristServer, params: types.DidOpenNotebookDocumentParams) -> None:
    ls.opened(params.notebook_document.uri)


@guarded
def notebook_did_change(ls: GristServer, params: types.DidChangeNotebookDocumentParams) -> None:
    ls.changed(params.notebook_document.uri)


@guarded
def notebook_did_save(ls: GristServer, params: types.DidSaveNotebookDocumentParams) -> None:
    ls.scheduler.schedule_dynamic(params.notebook_document.uri, 0.0)


@guarded
def notebook_did_close(ls: GristServer, params: types.DidCloseNotebookDocumentParams) -> None:
    ls.closed(params.notebook_document.uri)
    for cell in params.cell_text_documents:  # pushed to, so cleared by us
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))


@guarded
async def document_diagnostic(
    ls: GristServer, params: types.DocumentDiagnosticParams
) -> types.DocumentDiagnosticReport:
    return await ls.pull(params.text_document.uri, params.previous_result_id)


@guarded
def code_action(ls: GristServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    notebook = ls.notebook_of_cell(uri)
    if notebook is not None:  # a cell: the actions of the notebook's script there, as cell edits
        request = script_range(notebook, uri, params.range)
        if request is None:
            return []
        script_params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=notebook.uri),
            range=request,
            context=params.context,
        )
        return in_cells(notebook, code_action(ls, script_params) or [])
    snap = ls.snapshot(uri)
    entry = ls.published.get(uri)
    if snap is None or entry is None or entry[1] != snap.hash:
        return []  # diagnostics for an older text: their spans would edit the wrong place
    document_changes = bool(ls._capability("workspace.workspace_edit.document_changes"))

    def propose(verdict: Verdict) -> list:
        try:
            return core.propose(snap.text, verdict)
        except Exception as exc:
            ls.log_exception("proposing a fix failed", exc)
            return []

    return actions.code_actions(
        entry[2],
        params.range,
        uri,
        snap.version,
        snap.text,
        ls.encoding,
        only=params.context.only,
        document_changes=document_changes,
        propose=propose,
    )


@guarded
def recheck(ls: GristServer, *args: Any) -> None:
    uri = _uri_argument(args)
    notebook = ls.notebook_of_cell(uri) if uri is not None else None
    targets = [notebook.uri if notebook else uri] if uri is not None else sorted(ls.open_uris)
    for target in targets:
        if target not in ls.open_uris:
            ls.log(f"grist.recheck: {target} is not open", types.MessageType.Warning)
            continue
        ls.scheduler.forget(target)
        ls.scheduler.kick_static(target)
        ls.scheduler.schedule_dynamic(target, 0.0)


@guarded
async def create_reproducer(ls: GristServer, *args: Any) -> dict[str, Any] | None:
    uri = _uri_argument(args)
    key = args[1] if len(args) > 1 and isinstance(args[1], str) else None
    snap = ls.snapshot(uri) if uri else None
    verdict = ls.find_verdict(uri, key) if (uri and key) else None
    if snap is None or verdict is None or verdict.status is not Status.CONFIRMED or verdict.witness is None:
        ls.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Warning,
                message="GRIST: this finding is out of date or has no failing input; re-check the file and try again.",
            )
        )
        return None
    return await _write_reproducer(ls, snap, verdict)


@guarded
def status(ls: GristServer, *args: Any) -> dict[str, Any]:
    """What the server is doing, for "GRIST: show status" and for tests."""
    return {
        "version": __version__,
        "trusted": ls.client_trusted,
        "dynamic_allowed": ls.settings.dynamic_allowed(ls.client_trusted),
        "engine_runs": ls.scheduler.runs_started,
        "cache_hits": ls.scheduler.cache_hits,
        "running": sorted(uri for uri in ls.open_uris if ls.scheduler.running(uri)),
        "open_documents": len(ls.open_uris),
        "config_ready": ls.config_ready,
        "settings": dataclasses.asdict(ls.settings),
        "position_encoding": ls.encoding,
    }


def exit_(ls: GristServer, params: None) -> None:
    # pygls calls this before its own exit: leave before asyncio tears the tasks down.
    leave(ls)


def shutdown(ls: GristServer, params: None) -> None:
    ls.shutdown_requested = True
    ls.scheduler.shutdown()


FEATURES: list[tuple[str, Any, Callable[..., Any]]] = [
    (types.INITIALIZE, None, initialize),
    (types.INITIALIZED, None, initialized),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, did_change_configuration),
    (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, did_change_watched_files),
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (types.TEXT_DOCUMENT_DID_SAVE, None, did_save),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (types.NOTEBOOK_DOCUMENT_DID_OPEN, None, notebook_did_open),
    (types.NOTEBOOK_DOCUMENT_DID_CHANGE, None, notebook_did_change),
    (types.NOTEBOOK_DOCUMENT_DID_SAVE, None, notebook_did_save),
    (types.NOTEBOOK_DOCUMENT_DID_CLOSE, None, notebook_did_close),
    (
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(
            identifier="grist", inter_file_dependencies=False, workspace_diagnostics=False
        ),
        document_diagnostic,
    ),
    (
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, actions.REPRODUCER_KIND, actions.RECHECK_KIND],
            resolve_provider=False,
        ),
        code_action,
    ),
    (types.EXIT, None, exit_),
    (types.SHUTDOWN, None, shutdown),
]

COMMANDS: list[tuple[str, Callable[..., Any]]] = [
    (actions.RECHECK, recheck),
    (actions.CREATE_REPRODUCER, create_reproducer),
    (actions.STATUS, status),
]


def create_server() -> GristServer:
    """A server with every handler registered (one instance per session; tests start several)."""
    server = GristServer()
    for method, options, handler in FEATURES:
        server.feature(method, options)(handler)
    for name, handler in COMMANDS:
        server.command(name)(handler)
    return server


async def _write_reproducer(ls: GristServer, snap: Snapshot, verdict: Verdict) -> dict[str, Any] | None:
    loop = asyncio.get_running_loop()
    assert verdict.witness is not None
    folder = actions.reproducer_folder(snap.path, snap.root, ls.settings.reproducer_dir)
    files = await loop.run_in_executor(
        None, core.reproducer, verdict.site, verdict.witness, str(folder), Path.exists
    )
    target = folder / files.filename
    source = actions.payload_notice(sorted(files.payloads)) + files.source

    def write_payloads() -> None:
        # Binary tensors cannot travel in a WorkspaceEdit: they go straight to disk.
        for name, data in files.payloads.items():
            path = target.parent / Path(name).name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    await loop.run_in_executor(None, write_payloads)
    target_uri = target.as_uri()
    resource_create = "create" in [
        getattr(op, "value", op)
        for op in (ls._capability("workspace.workspace_edit.resource_operations") or [])
    ]
    if ls._capability("workspace.apply_edit") and resource_create:
        result = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(
                edit=actions.reproducer_edit(target_uri, source, resource_operations=True),
                label="GRIST: create reproducer test",
            )
        )
        if not result.applied:
            ls.log(f"the editor did not create {target}: {result.failure_reason}", types.MessageType.Warning)
            return None
    else:
        # The client cannot create files through an edit: write it ourselves.
        await loop.run_in_executor(
            None,
            lambda: (
                target.parent.mkdir(parents=True, exist_ok=True),
                target.write_text(source, encoding="utf-8"),
            ),
        )
    if ls._capability("window.show_document.support"):
        await ls.window_show_document_async(types.ShowDocumentParams(uri=target_uri, take_focus=True))
    shown = os.path.relpath(target, snap.root) if snap.root else str(target)
    ls.window_show_message(
        types.ShowMessageParams(type=types.MessageType.Info, message=reproducer_message(shown))
    )
    return {"uri": target_uri}


def reproducer_message(shown: str) -> str:
    """What the user reads once a reproducer exists: how to run it, and how to get pytest."""
    return (
        f"GRIST: created {shown}. Run it with `python -m pytest {shown}` (it fails while the bug is there, "
        "and errors if the program no longer runs to that line); if pytest is missing: `pip install pytest`."
    )


def _child_pids() -> list[int]:
    """Processes this server started (the engine's workers), from /proc."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as f:
                pids.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return pids


def _stop_children() -> None:
    for pid in _child_pids():
        try:
            # Engine workers lead their own session: take the whole group (the user's children too).
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


def leave(server: GristServer) -> None:
    """Stop every check and end the process now (LSP: exit code 0 after shutdown, 1 without).

    Not a normal interpreter exit: the engine's threads are not daemons and a fix re-check
    cannot be cancelled, so Python would wait for them long after the editor has gone.
    """
    server.scheduler.shutdown()
    _stop_children()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the client closed the pipe: nothing left to say
    os._exit(0 if server.shutdown_requested else 1)


class _QuietCancelRace(logging.Filter):
    """pygls warns when a $/cancelRequest names a request it has already answered. Editors cancel
    pulls and hovers all the time, so that race is normal: keep it at debug level, off the
    editor's output (where stderr lands) unless someone asks for debug logging."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith(
            "Cancel notification for unknown message id"
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def main() -> None:
    """Serve LSP on stdin/stdout until the client says exit (or goes away)."""
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietCancelRace())
    server = create_server()
    try:
        server.start_io()
    finally:
        leave(server)


if __name__ == "__main__":
    main()
