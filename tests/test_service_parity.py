"""One service behind both front ends: `grist-lsp --check` and an editor session report the same
findings for the same file and pyproject.toml, and the server follows pyproject.toml as it changes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from grist_lsp.analyzer.catalogue import KINDS
from tests.test_server import CONFIG, open_file, published_for, start, status, wait_for

pytestmark = pytest.mark.asyncio

ENGINE_WAIT = (
    300.0  # seconds before the wait gives up: a failure guard on a shared machine, not a speed check
)

MODEL = """import torch


def loss(logits):
    p = torch.softmax(logits, dim=-1)
    return -torch.log(p).sum()


def spread(x):
    return torch.sqrt(x).sum()


def ratio(a, b):
    return a / b


if __name__ == "__main__":
    x = torch.randn(2, 3)
    print(loss(x), spread(x), ratio(x, x))
"""

LOG, SQRT, DIV = KINDS["log"].code, KINDS["sqrt"].code, KINDS["div"].code

# Non-default on purpose: the server ignored [tool.grist] before it went through the service.
PYPROJECT = f"""[tool.grist]
budget = 2
per-file-ignores = {{"model.py" = ["{LOG}"]}}
"""


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def _engine_finished(client: LanguageClient) -> None:
    """Wait until one engine run (and its fix checks) is over: then every result is published."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ENGINE_WAIT
    while True:
        state = await status(client)
        if state["engine_runs"] >= 1 and not state["running"]:
            return
        if loop.time() > deadline:
            raise AssertionError(f"the engine run did not finish; server status: {state}")
        await asyncio.sleep(0.1)


def _cli_findings(grist_cli, root: Path) -> set[tuple[int, str, str]]:
    # --no-cache: the server must find them itself, not read the CLI's answer from the result cache.
    result = grist_cli("--check", "model.py", "--format", "json", "--no-cache", cwd=root)
    assert result.returncode in (0, 1), result.stderr
    findings = json.loads(result.stdout)["findings"]
    return {(f["line"], KINDS[f["kind"]].code, f["status"]) for f in findings}


def _server_findings(client: LanguageClient, uri: str) -> set[tuple[int, str, str]]:
    published = published_for(client, uri, 1) or []
    return {(d.range.start.line + 1, str(d.code), d.data["status"]) for d in published}


async def test_cli_check_and_a_server_session_give_the_same_findings(
    client: LanguageClient, tmp_path: Path, grist_cli
) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    from_cli = _cli_findings(grist_cli, tmp_path)
    assert LOG not in {code for _, code, _ in from_cli}  # the per-file ignore applies
    assert (10, SQRT, "confirmed") in from_cli  # the engine ran: sqrt of randn is NaN at once

    await start(client, tmp_path, {"budget": 9})  # the editor's budget is below [tool.grist]'s
    uri = open_file(client, tmp_path / "model.py", MODEL)

    await _engine_finished(client)
    assert _server_findings(client, uri) == from_cli


async def test_the_server_rereads_pyproject_toml_when_it_changes(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    await wait_for(
        client,
        lambda: any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in client.registrations),  # type: ignore[attr-defined]
        "the server asking the editor to watch pyproject.toml",
    )
    uri = open_file(client, tmp_path / "model.py", MODEL)
    await wait_for(client, lambda: published_for(client, uri, 1) is not None, "first diagnostics")
    assert LOG in {str(d.code) for d in published_for(client, uri, 1) or []}

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT, encoding="utf-8")
    before = len(client.publications)  # type: ignore[attr-defined]
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Created)]
        )
    )

    def republished_without_log() -> bool:
        fresh = [p for p in client.publications[before:] if p.uri == uri]  # type: ignore[attr-defined]
        return bool(fresh) and LOG not in {str(d.code) for d in fresh[-1].diagnostics}

    await wait_for(client, republished_without_log, "diagnostics under the new [tool.grist]")
    remaining = {str(d.code) for d in published_for(client, uri, 1) or []}
    assert {SQRT, DIV} <= remaining  # only the ignored code left


async def test_an_open_file_that_tool_grist_excludes_gets_no_diagnostics(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.grist]\nexclude = ["generated/"]\n', encoding="utf-8")
    (tmp_path / "generated").mkdir()
    await start(client, tmp_path, {"dynamic": {"enable": False}})
    skipped = open_file(client, tmp_path / "generated" / "model.py", MODEL)
    checked = open_file(client, tmp_path / "model.py", MODEL)
    await wait_for(
        client,
        lambda: (
            published_for(client, skipped, 1) is not None and published_for(client, checked, 1) is not None
        ),
        "diagnostics for both files",
    )
    assert published_for(client, skipped, 1) == []  # `grist-lsp --check .` skips it too
    assert LOG in {str(d.code) for d in published_for(client, checked, 1) or []}


ENTRY_PROGRAM = """import torch


def loss(p):
    return torch.log(p).sum()


def make():
    return loss, (torch.rand(4) + 0.5,)
"""


async def test_the_server_enters_the_program_through_tool_grist_entries(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.grist]\nentries = ["model.py:make"]\nbudget = 3\n', encoding="utf-8"
    )
    await start(client, tmp_path, {"budget": 1})
    uri = open_file(client, tmp_path / "model.py", ENTRY_PROGRAM)
    await _engine_finished(client)
    [log] = [d for d in published_for(client, uri, 1) or [] if str(d.code) == LOG]
    assert log.data["status"] == "confirmed", log.message
    assert log.data["verdict"]["witness"]["entry"].endswith("model.py:make")
