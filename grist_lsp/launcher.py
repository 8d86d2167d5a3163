"""`grist-lsp` and `python -m grist_lsp`: the command line, which serves LSP when asked to.

The one module that knows both adapters. ``cli.py`` never imports the language server (an
import-linter contract: a ``--check`` in CI must not load pygls), so serving is handed to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from grist_lsp import cli


def serve() -> int:
    """Run the language server on stdio until the client exits."""
    from grist_lsp.server.server import main as serve_main

    serve_main()
    return cli.EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, serve=serve)
