"""The `grist-lsp` command: serve LSP on stdio (no arguments) or `--check` paths for CI.

Exit codes: 0 nothing at or above `--fail-on`; 1 a finding at or above it, or a
program that cannot be imported (or, with `--diff`, fixes to apply); 2 usage errors (bad flags, missing paths, bad
`[tool.grist]`). The language server is imported only when serving, so
`--check` never imports pygls.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from grist_lsp import __version__
from grist_lsp.config import EXECUTOR_CHOICES, FAIL_ON_CHOICES
from grist_lsp.defaults import OPTIONS
from grist_lsp.model import counted

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grist-lsp",
        description="Find and prove NaN/INF bugs in PyTorch programs. Without arguments, serve the "
        "Language Server Protocol on stdio; with --check, check files and folders.",
        epilog="Exit status: 0 no finding at or above --fail-on, 1 findings (or a program that cannot be imported), 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=f"grist-lsp {__version__}")
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="serve LSP on stdio (the default without --check; accepted for editor clients)",
    )
    check = parser.add_argument_group("checking")
    check.add_argument("--check", action="store_true", help="check the PATHs (default: the current folder)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to check (with --check)")
    check.add_argument(
        "--format", choices=("text", "json", "sarif"), default="text", help="output format (default: text)"
    )
    check.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    _add_table_options(check)
    _add_actions(check)
    return parser


def _number(kind: Callable[[str], float], minimum: float, what: str) -> Callable[[str], float]:
    """An argparse `type=` that says what was expected (argparse then exits 2 with it)."""

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return convert


_non_negative_float = _number(float, 0, "a number of seconds >= 0")
_positive_float = _number(float, 1e-9, "a number of seconds > 0")
_non_negative_int = _number(int, 0, "an integer >= 0")
_positive_int = _number(int, 1, "an integer >= 1")
_input_scale = _number(float, 1, "a factor >= 1 (1: the program's own input range)")

# How argparse reads each flag of the defaults table; its help is the table's doc and default.
_FLAG_KINDS: dict[str, dict[str, Any]] = {
    "budget": {"type": _non_negative_float, "metavar": "SECONDS"},
    "seed": {"type": _non_negative_int, "metavar": "N"},
    "jobs": {"type": _positive_int, "metavar": "N"},
    "timeout": {"type": _positive_float, "metavar": "SECONDS"},
    "entries": {"action": "append", "metavar": "FILE:FUNC"},
    "script_args": {"action": "append", "metavar": "FILE.py=ARGS"},
    "exclude": {"action": "append", "metavar": "PATTERN"},
    "fail_on": {"choices": FAIL_ON_CHOICES},
    "max_input_scale": {"type": _input_scale, "metavar": "X"},
    "executor": {"choices": EXECUTOR_CHOICES},
    "ray_address": {"metavar": "HOST:PORT"},
    "baseline": {"metavar": "FILE"},
    "cache_dir": {"metavar": "DIR"},
    "static_only": {"action": "store_true"},
    "show_safe": {"action": "store_true"},
    # The flag turns the sandbox off; unset, [tool.grist] sandbox or the default decides.
    "sandbox": {"action": "store_const", "const": "off"},
}
_SHORT = {"jobs": "-j"}


def _add_table_options(group: argparse._ArgumentGroup) -> None:
    """The flags of `grist_lsp/defaults.py`. Unset ones stay None (or empty): `[tool.grist]` then decides."""
    for option in OPTIONS:
        if option.cli is None:
            continue
        kind = _FLAG_KINDS[option.name]
        shown = option.default if option.default not in (None, ()) else None
        flag_help = option.cli_help or option.doc
        if shown is not None and kind.get("action") not in ("store_true", "store_const"):
            flag_help += f" (default: {shown:g})" if isinstance(shown, float) else f" (default: {shown})"
        if kind.get("action") == "append":
            flag_help += "; repeatable"
            kind = {**kind, "default": []}
        flags = [option.cli, *([_SHORT[option.name]] if option.name in _SHORT else [])]
        group.add_argument(*flags, dest=option.name, help=flag_help, **kind)


def _add_actions(group: argparse._ArgumentGroup) -> None:
    """Flags that ask for something to be done or written, not options with a default."""
    group.add_argument(
        "--write-reproducers", metavar="DIR", help="write a pytest reproducer for each confirmed bug into DIR"
    )
    group.add_argument("--fix", action="store_true", help="apply verified fixes to the files")
    group.add_argument(
        "--diff",
        action="store_true",
        help="print verified fixes as a diff, change nothing (exit 1 if there are any)",
    )
    group.add_argument("--config", metavar="PYPROJECT", help="read [tool.grist] from this file")
    group.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply excludes to files named explicitly too (for pre-commit)",
    )
    group.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="record today's findings in FILE; later runs with --baseline FILE report only new ones",
    )
    group.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the result cache (every file with open sites runs again)",
    )
    group.add_argument(
        "--show-unused-suppressions",
        action="store_true",
        help="report `# grist: ignore` comments that silence no finding (code GRIST001)",
    )


class _Progress:
    """One self-overwriting status line on a terminal's stderr."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.width = 0

    def __call__(self, message: str, fraction: float) -> None:
        line = f"grist-lsp [{int(fraction * 100):3d}%] {message}"[:100]
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def run_check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from grist_lsp.check import CheckOptions, check_paths
    from grist_lsp.config import ConfigError
    from grist_lsp.discovery import PathNotFound
    from grist_lsp.output import display_path, render

    options = CheckOptions(
        **{option.name: getattr(args, option.name) for option in OPTIONS if option.cli is not None},
        write_reproducers=args.write_reproducers,
        fix=args.fix,
        diff=args.diff,
        config=args.config,
        force_exclude=args.force_exclude,
        write_baseline=args.write_baseline,
        show_unused_suppressions=args.show_unused_suppressions,
        no_cache=args.no_cache,
    )
    if args.output is not None:
        problem = _unwritable(Path(args.output))
        if problem:  # said now, not after a run whose report would then be lost
            parser.exit(EXIT_USAGE, f"grist-lsp: error: --output {args.output}: {problem}\n")
    progress = _Progress(sys.stderr) if args.format == "text" and sys.stderr.isatty() else None
    try:
        report = check_paths(args.paths or ["."], options, progress=progress)
    except (ConfigError, PathNotFound) as exc:
        if progress:
            progress.clear()
        parser.exit(EXIT_USAGE, f"grist-lsp: error: {exc}\n")
    if progress:
        progress.clear()
    for warning in report.warnings:
        print(f"grist-lsp: warning: {warning}", file=sys.stderr)
    if report.baseline_written:
        recorded = sum(report.stats.get(k, 0) for k in ("confirmed", "possible"))
        print(
            f"grist-lsp: wrote {counted(recorded, 'finding')} to the baseline {report.baseline_written}",
            file=sys.stderr,
        )
    if (args.fix or args.diff) and args.static_only:
        print(
            "grist-lsp: warning: --fix/--diff use only verified fixes, and --static-only verifies none; "
            "drop --static-only to let the engine re-check them",
            file=sys.stderr,
        )

    if args.diff:
        text = "".join(report.diffs[f] for f in sorted(report.diffs))
        count = sum(len(d.splitlines()) > 0 for d in report.diffs.values())
        print(f"grist-lsp: verified fixes would change {counted(count, 'file')}", file=sys.stderr)
        _emit(text, args.output, parser)
        return EXIT_FINDINGS if report.diffs else EXIT_OK

    _emit(render(report, args.format, show_safe=args.show_safe), args.output, parser)
    if args.fix and report.fixed:
        files = sorted({display_path(v.site.file) for v in report.fixed})
        print(
            f"grist-lsp: applied {counted(len(report.fixed), 'verified fix', 'verified fixes')} in {', '.join(files)}",
            file=sys.stderr,
        )
    for file, problem in report.invalid.items():  # no notebook: a usage error, after the others' report
        print(f"grist-lsp: error: {display_path(file)}: {problem}", file=sys.stderr)
    if report.invalid:
        return EXIT_USAGE
    return EXIT_FINDINGS if report.failing() else EXIT_OK


def _unwritable(path: Path) -> str | None:
    """Why the report could not be written to ``path``, asked before any program runs; None when
    it can be (the file is only written at the end, so a run interrupted leaves no empty one)."""
    folder = path.parent
    if path.is_dir():
        return "is a folder; name a file in it"
    if not folder.is_dir():
        return f"the folder {folder} does not exist; create it first or name a file in an existing folder"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable; pass a writable path"
    if not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable; pass a writable path"
    return None


def _emit(text: str, output: str | None, parser: argparse.ArgumentParser) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        parser.exit(
            EXIT_USAGE,
            f"grist-lsp: error: {output}: cannot write the report ({exc.strerror}); "
            "check the folder exists and is writable\n",
        )


def main(argv: Sequence[str] | None = None, serve: Callable[[], int] | None = None) -> int:
    """The command line; without ``--check`` it calls ``serve`` (``launcher.py`` passes the
    language server: this module never imports it, so a check never loads pygls)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_only = [
        flag
        for flag, on in (
            ("PATH", bool(args.paths)),
            ("--static-only", args.static_only),
            ("--entry", bool(args.entries)),
            ("--fix", args.fix),
            ("--diff", args.diff),
            ("--output", args.output is not None),
            ("--format", args.format != "text"),
            ("--fail-on", args.fail_on is not None),
            ("--baseline", args.baseline is not None),
            ("--write-baseline", args.write_baseline is not None),
            ("--max-input-scale", args.max_input_scale is not None),
            ("--show-unused-suppressions", args.show_unused_suppressions),
            ("--no-sandbox", args.sandbox is not None),
            ("--cache-dir", args.cache_dir is not None),
            ("--no-cache", args.no_cache),
        )
        if on
    ]
    if not args.check:
        if check_only:
            parser.error(f"{', '.join(check_only)} needs --check (without it grist-lsp serves LSP on stdio)")
        if serve is None:
            parser.error(
                "this entry point only checks: run `grist-lsp` or `python -m grist_lsp` to serve LSP"
            )
        return serve()
    if args.stdio:
        parser.error("--stdio serves the language server; it cannot be combined with --check")
    if args.fix and args.diff:
        parser.error("--fix and --diff exclude each other: --diff only shows what --fix would write")
    try:
        return run_check(args, parser)
    except KeyboardInterrupt:
        print("grist-lsp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `grist-lsp --check . | head`: the reader left; not an error of ours.
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
