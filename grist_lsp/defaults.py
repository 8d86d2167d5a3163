"""The one table of options: name, type, default, CLI flag, editor setting, `[tool.grist]` key, doc.

The CLI's flags (`cli.build_parser`), the server's settings (`server/settings.py`), the
VS Code extension's `package.json` and the service's resolution (`service.resolve_settings`)
all take their defaults from here; `tests/test_defaults.py` checks that they agree. A value
is decided, highest first, by: an explicit CLI flag, `[tool.grist]`, an editor setting,
this table (see ARCHITECTURE.md, "One service").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Worker processes when neither --jobs nor [tool.grist] jobs says: enough to overlap files,
# few enough to leave a laptop usable.
MAX_DEFAULT_JOBS = 4


@dataclass(frozen=True)
class Option:
    """One option, under every name a front end knows it by (None: that front end lacks it)."""

    name: str  # the field of service.Settings / CheckOptions / server Settings
    type: str  # JSON-schema type, as package.json declares it: number, integer, boolean, string, array
    default: Any
    doc: str
    cli: str | None = None  # the CLI flag
    setting: str | None = None  # the editor setting, without the "grist." prefix
    toml: str | None = None  # the [tool.grist] key
    server: bool = True  # the language server reads `setting` (False: only the extension does)
    cli_help: str | None = None  # the flag's help when it is not `doc` (a flag that turns something off)


OPTIONS: tuple[Option, ...] = (
    Option(
        "budget",
        "number",
        5.0,
        "seconds the dynamic search may spend on each possible bug before giving up",
        cli="--budget",
        setting="budget",
        toml="budget",
    ),
    Option("seed", "integer", 0, "random seed of the search", cli="--seed", toml="seed"),
    Option(
        "jobs",
        "integer",
        None,
        f"parallel worker processes (default: the cores, at most {MAX_DEFAULT_JOBS}; the server uses one)",
        cli="--jobs",
        toml="jobs",
    ),
    Option(
        "timeout",
        "number",
        30.0,
        "wall-clock seconds for the program to start and reach its sites in one worker run",
        cli="--timeout",
        setting="dynamic.timeout",
        toml="timeout",
    ),
    Option("memory_mb", "integer", 4096, "address-space limit of one worker (MiB)", toml="memory-mb"),
    Option(
        "entries",
        "array",
        (),
        "entry points FILE:FUNCTION returning (callable, args[, kwargs])",
        cli="--entry",
        setting="entries",
        toml="entries",
    ),
    Option(
        "script_args",
        "object",
        (),
        "command-line arguments of a script the check runs: FILE.py=ARGS, ARGS split as a shell would "
        '(in [tool.grist]: script-args = {"train.py" = ["--epochs", "1"]})',
        cli="--script-args",
        toml="script-args",
    ),
    Option(
        "fail_on",
        "string",
        "confirmed",
        "lowest status that makes the exit status 1",
        cli="--fail-on",
        toml="fail-on",
    ),
    Option(
        "sandbox",
        "string",
        "auto",
        "isolation of the program under check: auto (bubblewrap, else an audit hook) or off",
        cli="--no-sandbox",
        toml="sandbox",
        cli_help="run the program under check with your full rights (no bubblewrap, no audit hook)",
    ),
    Option(
        "executor",
        "string",
        "local",
        "where files are checked: local (worker processes on this machine) or ray (one Ray task per file; "
        "pip install 'grist-lsp[ray]')",
        cli="--executor",
        toml="executor",
    ),
    Option(
        "ray_address",
        "string",
        None,
        "the Ray cluster of --executor ray (default: $RAY_ADDRESS, else a local cluster of --jobs CPUs)",
        cli="--ray-address",
        toml="ray-address",
    ),
    Option(
        "max_input_scale",
        "number",
        None,
        "keep a bug possible when its witness needs inputs beyond this factor of the program's own",
        cli="--max-input-scale",
        toml="max-input-scale",
    ),
    Option(
        "exclude",
        "array",
        (),
        "gitignore-style patterns to skip, relative to the project root",
        cli="--exclude",
        toml="exclude",
    ),
    Option(
        "cache_dir",
        "string",
        ".grist_cache",
        "folder of the result cache: a file that did not change, nor anything it runs, is not run again "
        "(relative to the project root in [tool.grist])",
        cli="--cache-dir",
        toml="cache-dir",
    ),
    Option("baseline", "string", None, "report only findings not in this baseline file", cli="--baseline"),
    Option("static_only", "boolean", False, "run only the static pass", cli="--static-only"),
    Option(
        "show_safe", "boolean", False, "also report sites proved safe", cli="--show-safe", setting="showSafe"
    ),
    Option("enable", "boolean", True, "check Python files at all", setting="enable"),
    Option(
        "dynamic_enable",
        "boolean",
        True,
        "run the code (in worker processes) to confirm possible bugs; never in untrusted workspaces",
        setting="dynamic.enable",
    ),
    Option(
        "debounce",
        "number",
        1.0,
        "seconds without edits before the dynamic check of a changed file starts",
        setting="dynamic.debounce",
    ),
    Option("show_possible", "boolean", True, "show possible (unconfirmed) bugs", setting="showPossible"),
    Option(
        "reproducer_dir",
        "string",
        "tests/grist",
        "folder where Create reproducer test writes, from the workspace folder",
        setting="reproducerDir",
    ),
    Option(
        "interpreter",
        "string",
        "",
        "Python that runs the language server",
        setting="interpreter",
        server=False,
    ),
    Option("trace", "string", "off", "log the LSP messages", setting="trace.server", server=False),
)

BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}


def default(name: str) -> Any:
    """The built-in default of option ``name`` (KeyError for a name the table does not have)."""
    return BY_NAME[name].default


def server_settings() -> dict[str, Option]:
    """Editor setting key (without "grist.") -> option, for the settings the server reads."""
    return {o.setting: o for o in OPTIONS if o.setting is not None and o.server}
