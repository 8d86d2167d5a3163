"""How long a user waits in the editor: the language server driven over stdio by a real client.

For each round a fresh server (`python -m grist_lsp.server.server`, a fresh cache folder) is
started by pytest-lsp's client with VS Code's capabilities, a training script is opened, and
the clock runs from `didOpen` to:

- **static**: the first diagnostics for the file;
- **confirmed**: the first diagnostic of a confirmed finding (severity Error); **all confirmed**:
  the last new confirmed finding seen before the fixes are verified (the file's other bugs);
- **fixes verified**: a quick fix at that diagnostic titled "(verified by GRIST)", asked for
  as the editor asks (`textDocument/codeAction`), every 0.25 s; **all fixes**: a verified fix
  at every confirmed finding of the file (never, when one has none that passes its check).

Then a line is inserted at the top and the file saved, and the same clock runs from `didSave`
to the confirmed diagnostic on its new line and its verified fix. Diagnostics are pulled
(`textDocument/diagnostic`) when the server asks (`workspace/diagnostic/refresh`) and every
0.25 s, as VS Code does for open files; `--push` takes them from `publishDiagnostics` instead.

Goals (issue 12): confirmed < 5 s and fixes verified < 10 s after opening or saving, on 2 cores.

    python bench/server_latency.py                     # bench/latency/train_classifier.py, 3 rounds
    python bench/server_latency.py --rounds 5 --json
    python bench/server_latency.py path/to/train.py --push
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, default_converter, register_lsp_features

from grist_lsp.server.scheduler import CARRIED_NOTE

HERE = Path(__file__).resolve().parent
DEFAULT_PROGRAM = HERE / "latency" / "train_classifier.py"
POLL = 0.25  # seconds between pulls and code-action requests, about what an editor does
GOALS = {"open_confirmed": 5.0, "open_fixes": 10.0, "save_confirmed": 5.0, "save_fixes": 10.0}


@dataclass
class Round:
    """One server's timings, seconds from didOpen / didSave (None: never within the limit)."""

    open_static: float | None = None
    open_confirmed: float | None = None
    open_all_confirmed: float | None = None  # the last of the run's confirmations shown
    open_fixes: float | None = None
    open_all_fixes: float | None = None  # every confirmed finding with a verified fix
    save_confirmed: float | None = None
    save_fixes: float | None = None
    confirmed_line: int | None = None  # 1-based, as the editor shows it
    findings: list[str] = field(default_factory=list)


class Watch:
    """The diagnostics the client currently holds for one file, by pull or by push."""

    def __init__(self, client: LanguageClient, uri: str, push: bool) -> None:
        self.client, self.uri, self.push = client, uri, push
        self.items: list[types.Diagnostic] | None = None
        self.changed = asyncio.Event()
        self.listeners: list[Any] = []  # called with each new set of diagnostics

    def take(self, diagnostics: list[types.Diagnostic]) -> None:
        self.items = list(diagnostics)
        for listener in self.listeners:
            listener(self.items)
        self.changed.set()

    async def pull(self) -> None:
        report = await self.client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=self.uri))
        )
        if isinstance(report, types.RelatedFullDocumentDiagnosticReport):
            self.take(report.items)

    async def until(self, predicate: Any, limit: float) -> Any:
        """The first non-None ``predicate(diagnostics)``, or None after ``limit`` seconds."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if not self.push:
                await self.pull()
            if self.items is not None and (found := predicate(self.items)) is not None:
                return found
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), POLL)
            except TimeoutError:
                pass
        return None


def quiet_for(out: Round) -> float:
    """How long to keep watching, after the first fixes are verified, for later confirmations
    and their fixes: twice the open->fixes time, at least 20 s."""
    return max(20.0, 2 * (out.open_fixes or 0.0))


def confirmed(diagnostics: list[types.Diagnostic]) -> types.Diagnostic | None:
    """The first confirmed finding of this text (one carried over from the text before an
    edit, shown while the engine re-checks, does not count)."""
    errors = [
        d
        for d in diagnostics
        if d.severity == types.DiagnosticSeverity.Error and CARRIED_NOTE.strip() not in d.message
    ]
    return min(errors, key=lambda d: d.range.start.line) if errors else None


async def has_verified_fix(watch: Watch, diagnostics: list[types.Diagnostic]) -> bool:
    """Whether the quick fixes at the first of ``diagnostics`` include one titled verified;
    asked with the diagnostics the client holds there, as an editor does (the server reads
    the fixes from them)."""
    actions = await watch.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=watch.uri),
            range=diagnostics[0].range,
            context=types.CodeActionContext(diagnostics=diagnostics),
        )
    )
    return any("(verified by GRIST)" in a.title for a in actions or [])


async def every_fix_verified(watch: Watch) -> bool:
    """Whether every confirmed finding the client holds has a quick fix titled verified."""
    if not watch.push:
        await watch.pull()
    found = [d for d in watch.items or [] if confirmed([d]) is not None]
    for d in found:
        if not await has_verified_fix(watch, [d]):
            return False
    return bool(found)


async def fixes_verified(watch: Watch, line: int, limit: float) -> bool:
    """Whether a quick fix for the confirmed finding on 0-based ``line`` is titled verified
    within ``limit`` seconds, asked with the client's current diagnostic every ``POLL``."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not watch.push:
            await watch.pull()
        current = [d for d in watch.items or [] if d.range.start.line == line and confirmed([d]) is not None]
        if current and await has_verified_fix(watch, current):
            return True
        await asyncio.sleep(POLL)
    return False


def make_client(push: bool) -> tuple[LanguageClient, dict[str, Watch]]:
    """pytest-lsp's client (it answers the server's configuration and progress requests),
    with the file's diagnostics taken from pushes or re-pulled on a refresh."""
    client = LanguageClient(converter_factory=default_converter)
    watches: dict[str, Watch] = {}

    def on_publish(_: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        watch = watches.get(params.uri)
        if watch is not None and watch.push:
            watch.take(params.diagnostics)

    def on_refresh(_: LanguageClient, __: None) -> None:  # VS Code re-pulls at once
        for watch in watches.values():
            watch.changed.set()  # the waiting loop pulls again at once

    def on_register(_: LanguageClient, __: types.RegistrationParams) -> None:
        return None  # as VS Code does: dynamic registrations accepted

    features = {
        **DEFAULT_CLIENT_FEATURES,
        types.CLIENT_REGISTER_CAPABILITY: on_register,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: on_publish,
        types.WORKSPACE_DIAGNOSTIC_REFRESH: on_refresh,
    }
    register_lsp_features(client, features)
    return client, watches


def capabilities(push: bool) -> types.ClientCapabilities:
    """VS Code's recorded capabilities; with the pull model as VS Code >= 1.74 declares it
    (the recording predates it), unless ``push``."""
    caps = client_capabilities("visual-studio-code")
    assert caps.text_document is not None and caps.workspace is not None
    if push:
        caps.text_document.diagnostic = None
        caps.workspace.diagnostics = None
    else:
        caps.text_document.diagnostic = types.DiagnosticClientCapabilities(
            dynamic_registration=True, related_document_support=False
        )
        caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps


async def one_round(program: Path, push: bool, limit: float) -> Round:
    out = Round()
    with tempfile.TemporaryDirectory(prefix="grist-latency-") as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        path = root / program.name
        text = program.read_text(encoding="utf-8")
        path.write_text(text, encoding="utf-8")
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
        client, watches = make_client(push)
        await client.start_io(sys.executable, "-m", "grist_lsp.server.server", env=env)
        try:
            await client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities(push),
                    root_uri=root.as_uri(),
                    workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
                )
            )
            uri = path.as_uri()
            watch = watches[uri] = Watch(client, uri, push)
            started = time.monotonic()
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
                )
            )
            if await watch.until(lambda items: items, limit) is not None:
                out.open_static = time.monotonic() - started
            found = await watch.until(confirmed, limit)
            if found is None:
                return out
            out.open_confirmed = time.monotonic() - started
            out.confirmed_line = found.range.start.line + 1
            seen = {found.range.start.line}
            out.open_all_confirmed = out.open_confirmed

            def more_confirmed(items: list[types.Diagnostic]) -> None:
                nonlocal seen
                lines = {d.range.start.line for d in items if confirmed([d]) is not None}
                if lines - seen:
                    seen |= lines
                    out.open_all_confirmed = time.monotonic() - started

            watch.listeners.append(more_confirmed)
            if await fixes_verified(watch, found.range.start.line, limit):
                out.open_fixes = time.monotonic() - started
            # The fixes may be checked before the search ends: wait for the rest of the run.
            deadline = time.monotonic() + quiet_for(out)
            while time.monotonic() < deadline:
                if await every_fix_verified(watch):
                    out.open_all_fixes = time.monotonic() - started
                    break
                await asyncio.sleep(POLL)
            await watch.until(lambda items: None, max(0.0, deadline - time.monotonic()))
            watch.listeners.clear()
            out.findings = [f"{d.range.start.line + 1}:{d.code}" for d in watch.items or [] if confirmed([d])]

            # An edit away from the bug, then a save: the finding moves down one line.
            edited = "# edited\n" + text
            path.write_text(edited, encoding="utf-8")
            watch.items = None
            started = time.monotonic()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)],
                )
            )
            client.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            moved = out.confirmed_line  # 0-based new line == 1-based old line

            def confirmed_moved(items: list[types.Diagnostic]) -> types.Diagnostic | None:
                d = confirmed(items)
                return d if d is not None and d.range.start.line == moved else None

            found = await watch.until(confirmed_moved, limit)
            if found is not None:
                out.save_confirmed = time.monotonic() - started
                if await fixes_verified(watch, found.range.start.line, limit):
                    out.save_fixes = time.monotonic() - started
        finally:
            await stop(client)
            shutil.rmtree(Path(tmp) / "cache", ignore_errors=True)
    return out


async def stop(client: LanguageClient) -> None:
    """Stop the client; a server that has not exited 10 s after `exit` is killed."""
    server = getattr(client, "_server", None)
    try:
        await asyncio.wait_for(client.shutdown_session(), 10)
    except Exception as exc:  # a server that fails to shut down still has to go
        print(f"warning: shutdown failed: {exc!r}", file=sys.stderr)
    try:
        await asyncio.wait_for(client.stop(), 10)
    except TimeoutError:
        if server is not None and server.returncode is None:
            server.kill()
            print("warning: the server did not exit 10 s after `exit`; killed", file=sys.stderr)


def median(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None]
    return statistics.median(real) if len(real) == len(values) and real else None


def show(value: float | None) -> str:
    return "   never" if value is None else f"{value:7.2f}s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program", nargs="?", type=Path, default=DEFAULT_PROGRAM)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--push", action="store_true", help="publishDiagnostics instead of pull diagnostics")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds to wait for each milestone")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rounds = []
    for i in range(args.rounds):
        r = asyncio.run(one_round(args.program.resolve(), args.push, args.limit))
        rounds.append(r)
        if not args.json:
            print(
                f"round {i + 1}: open->static {show(r.open_static)}  open->confirmed {show(r.open_confirmed)}"
                f"  open->all confirmed {show(r.open_all_confirmed)}  open->all fixes {show(r.open_all_fixes)}"
                f"  open->fixes {show(r.open_fixes)}  save->confirmed {show(r.save_confirmed)}"
                f"  save->fixes {show(r.save_fixes)}  (confirmed line {r.confirmed_line})",
                flush=True,
            )
    medians = {
        name: median([getattr(r, name) for r in rounds])
        for name in asdict(Round())
        if name.startswith(("open", "save"))
    }
    if args.json:
        print(
            json.dumps(
                {
                    "program": str(args.program),
                    "push": args.push,
                    "rounds": [asdict(r) for r in rounds],
                    "median": medians,
                },
                indent=2,
            )
        )
        return 0
    lines = len(args.program.read_text(encoding="utf-8").splitlines())
    print(
        f"\n{args.program.name} ({lines} lines), {args.rounds} rounds, {'push' if args.push else 'pull'} diagnostics, median:"
    )
    for name, value in medians.items():
        goal = GOALS.get(name)
        verdict = (
            ""
            if goal is None or value is None
            else f"  goal < {goal:.0f} s: {'met' if value < goal else 'NOT met'}"
        )
        label = name.replace("_", " -> ", 1).replace("_", " ")
        print(f"  {label:22s} {show(value)}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
