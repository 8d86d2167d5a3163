"""`grist-lsp` and `python -m grist_lsp`: the command line, which serves LSP when asked to.

The one module that knows both adapters. ``cli.py`` never imports the language server (an
import-linter contract: a ``--check`` in CI must not load pygls), so serving is handed to it.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Sequence

from grist_lsp import cli


def serve() -> int:
    """Run the language server on stdio until the client exits."""
    from grist_lsp.server.server import main as serve_main

    serve_main()
    return cli.EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, serve=serve)


def run() -> None:
    """The console script and ``python -m grist_lsp``: ``main``, then ``exit_now``."""
    exit_now(main())


def exit_now(code: int) -> None:
    """Exit with ``code`` without tearing the interpreter down, when nothing else still runs.

    Freeing every module and object of a process that loaded libcst takes 80-90 ms, a few
    percent of a whole check, spent after the report is out. The exit handlers still run (a
    ``weakref.finalize`` cleanup included) and the streams are flushed; a thread that is not a
    daemon still gets its normal exit, which waits for it.
    """
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said on it
            pass
    os._exit(code)
