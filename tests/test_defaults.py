"""The defaults table (`grist_lsp/defaults.py`) against every front end that repeats it, and the
order in which the service lets the CLI, `[tool.grist]` and the editor decide a value."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from grist_lsp.cli import build_parser
from grist_lsp.defaults import OPTIONS, server_settings
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.server.settings import Settings, merge_settings
from grist_lsp.service import CheckOptions, EditorSettings, resolve_settings

PACKAGE_JSON = Path(__file__).resolve().parent.parent / "vscode-extension" / "package.json"

# Flags that ask for an action or an output, not an option with a default.
ACTION_FLAGS = {
    "-h",
    "--help",
    "--version",
    "--stdio",
    "--check",
    "--format",
    "--output",
    "-o",
    "--write-reproducers",
    "--no-cache",
    "--fix",
    "--diff",
    "--config",
    "--force-exclude",
    "--write-baseline",
    "--show-unused-suppressions",
}


def _plain(value: Any) -> Any:
    """Tuples as lists and whole floats as ints, as JSON would hold them."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def test_cli_flags_server_settings_and_package_json_agree_with_the_defaults_table() -> None:
    parser = build_parser()
    flags = {flag: action for action in parser._actions for flag in action.option_strings}
    unset = vars(parser.parse_args(["--check"]))
    for option in (o for o in OPTIONS if o.cli is not None):
        action = flags[option.cli]
        assert action.dest == option.name, option.cli
        # Unset flags stay unset, so that [tool.grist] and then the table decide.
        assert unset[option.name] in (None, False, []), option.cli
        if option.default not in (None, ()) and not isinstance(action.const, str | bool):
            shown = f"{option.default:g}" if isinstance(option.default, float) else str(option.default)
            assert f"(default: {shown})" in (action.help or ""), (option.cli, action.help)
    table_flags = {o.cli for o in OPTIONS if o.cli is not None} | {"-j"}
    assert set(flags) - ACTION_FLAGS == table_flags, "a CLI option missing from grist_lsp/defaults.py"

    server = Settings()
    read_by_server = server_settings()
    for key, option in read_by_server.items():
        assert _plain(getattr(server, option.name)) == _plain(option.default), key
        # The key the table names is the one the server reads.
        probe = {"budget": 1.5, "entries": ["a.py:f"], "dynamic.timeout": 2.5, "reproducerDir": "x"}
        if key in probe:
            assert getattr(merge_settings(server, {"grist": {key: probe[key]}}), option.name) != getattr(
                server, option.name
            ), key

    declared = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))["contributes"]["configuration"][
        "properties"
    ]
    in_table = {f"grist.{o.setting}": o for o in OPTIONS if o.setting is not None}
    assert set(declared) == set(in_table)
    for key, option in in_table.items():
        assert _plain(declared[key]["default"]) == _plain(option.default), key
        assert declared[key]["type"] == option.type, key

    engine = EngineOptions()
    for name in ("budget", "seed", "timeout", "memory_mb", "sandbox"):
        assert getattr(engine, name) == next(o.default for o in OPTIONS if o.name == name), name


def test_a_cli_flag_beats_tool_grist_which_beats_the_editor_which_beats_the_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.grist]\nbudget = 2\ntimeout = 7\n", encoding="utf-8")
    (tmp_path / "m.py").write_text("x = 1\n", encoding="utf-8")
    editor = EditorSettings({"budget": 3.0, "timeout": 9.0, "entries": []}, tmp_path)
    decided = resolve_settings([str(tmp_path / "m.py")], CheckOptions(budget=1.0), editor)
    assert (decided.budget, decided.timeout, decided.seed) == (1.0, 7.0, 0)

    (tmp_path / "pyproject.toml").unlink()
    decided = resolve_settings([str(tmp_path / "m.py")], CheckOptions(), editor)
    assert (decided.budget, decided.timeout, decided.root) == (3.0, 9.0, tmp_path)


def test_an_unset_flag_leaves_the_value_to_tool_grist(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.grist]\nbudget = 2\n", encoding="utf-8")
    args = build_parser().parse_args(["--check", str(tmp_path)])
    options = CheckOptions(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(CheckOptions) if hasattr(args, f.name)}
    )
    assert resolve_settings([str(tmp_path)], options).budget == 2.0
