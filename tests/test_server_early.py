"""A confirmation is shown, and its fixes checked, while the engine still searches the file.

The program has a bug the search finds at once (``torch.log`` of a probability that a probe
sets to 0) and, after it, a site the search cannot break (the log of something it keeps above
1), which takes the search its whole budget. The editor must not wait for that second search:
the confirmed diagnostic, then its verified fix, arrive while the run's progress is still open.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from grist_lsp.analyzer.catalogue import KINDS
from tests.test_server import CONFIG, open_file, start, wait_for

PROGRAM = """import torch


def score(p):
    return torch.log(p)


def grow(x):
    s = x.abs() + 1
    for _ in range(3):
        s = s * s + s
    return torch.log(s)


def entry():
    x = torch.tensor([0.3, 1.2])
    p = torch.tensor([0.5, 0.25])
    return score(p).sum() + grow(x).sum()


entry()
"""
BUG_LINE = 4  # 0-based: `return torch.log(p)`
LOG = KINDS["log"].code

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def confirmed_bug(params: types.PublishDiagnosticsParams) -> types.Diagnostic | None:
    return next(
        (
            d
            for d in params.diagnostics
            if d.code == LOG
            and d.severity == types.DiagnosticSeverity.Error
            and d.range.start.line == BUG_LINE
        ),
        None,
    )


def other_site(params: types.PublishDiagnosticsParams) -> types.Diagnostic | None:
    return next((d for d in params.diagnostics if d.code == LOG and d.range.start.line != BUG_LINE), None)


async def test_confirmation_is_shown_while_the_other_site_is_still_searched(
    client: LanguageClient, tmp_path: Path
) -> None:
    await start(client, tmp_path, {"budget": 5})
    uri = open_file(client, tmp_path / "prog.py", PROGRAM)

    def searched(params: types.PublishDiagnosticsParams) -> bool:
        """The run's answer has landed: the other site's reason tells what its search saw."""
        other = other_site(params)
        return other is not None and "dynamic:" in other.data["verdict"]["reason"]

    mine = lambda: [p for p in client.publications if p.uri == uri]  # noqa: E731
    await wait_for(client, lambda: any(searched(p) for p in mine()), "the run's answer")
    publications = mine()
    first = next((p for p in publications if confirmed_bug(p) is not None), None)
    assert first is not None, f"the log on line {BUG_LINE + 1} was never shown confirmed"
    assert not searched(first), "the confirmation waited for the other site's search to end"
    other = other_site(first)
    assert other is not None and other.severity == types.DiagnosticSeverity.Warning  # still possible
    bug = confirmed_bug(first)
    assert bug is not None and bug.data["verdict"]["witness"]["replayed"] is True

    # Its fixes are re-checked meanwhile: a verified one is shown, and the final answer keeps it.
    def verified(params: types.PublishDiagnosticsParams) -> bool:
        d = confirmed_bug(params)
        return d is not None and any(f["verified"] for f in d.data["verdict"]["fixes"])

    await wait_for(client, lambda: any(verified(p) for p in mine()), "a verified fix for the log")
    await wait_for(
        client,
        lambda: any(
            isinstance(r, types.WorkDoneProgressEnd) for rs in client.progress_reports.values() for r in rs
        ),
        "the end of the run",
    )
    assert verified(mine()[-1]), "the run's final answer lost the verified fix found early"
