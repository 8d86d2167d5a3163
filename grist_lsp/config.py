"""Read `[tool.grist]` from the nearest pyproject.toml and check every key.

The CLI and the language server share this: both must agree on which files are
excluded and which entries the engine starts from. Every error names the file,
the key and what to write instead, because a bad config is a usage error
(exit 2), not a crash.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAIL_ON_CHOICES = ("confirmed", "possible")

# Keys accepted in [tool.grist]; both spellings of multi-word keys, since TOML
# users write either and a silently ignored key is worse than either choice.
_KNOWN_KEYS = {
    "exclude",
    "extend-exclude",
    "include",
    "entries",
    "budget",
    "fail-on",
    "seed",
    "jobs",
    "timeout",
    "memory-mb",
    "select",
    "ignore",
    "per-file-ignores",
    "baseline",
    "max-input-scale",
    "sandbox",
    "script-args",
    "executor",
    "ray-address",
    "cache-dir",
}
SANDBOX_CHOICES = ("auto", "off")
EXECUTOR_CHOICES = ("local", "ray")


class ConfigError(Exception):
    """A `[tool.grist]` table (or a CLI value) that cannot be used; the message says where and why."""


@dataclass
class GristConfig:
    """Settings from `[tool.grist]`. None means "not set here"; the CLI fills defaults.

    ``root`` is the folder holding the pyproject.toml: exclude/include patterns
    and entry file names are relative to it.
    """

    root: Path
    source: Path | None = None  # the pyproject.toml it came from, if any
    exclude: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    budget: float | None = None
    fail_on: str | None = None
    seed: int | None = None
    jobs: int | None = None
    timeout: float | None = None
    memory_mb: int | None = None
    select: list[str] | None = None  # rule codes to report (None: all)
    ignore: list[str] = field(default_factory=list)  # rule codes never reported
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)  # pattern -> rule codes
    baseline: str | None = None  # baseline file, relative to root
    max_input_scale: float | None = (
        None  # witnesses beyond this factor of the program's inputs stay `possible`
    )
    sandbox: str | None = None  # "auto" | "off": isolation of the program under check
    executor: str | None = None  # "local" | "ray": where files are checked
    ray_address: str | None = None  # the Ray cluster of the ray executor
    # Absolute script path -> the command-line arguments it is run with (`script-args`).
    script_args: dict[str, list[str]] = field(default_factory=dict)
    cache_dir: Path | None = None  # the result cache's folder (`cache-dir`), absolute


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` that has a `[tool.grist]` table.

    Falls back to the nearest pyproject.toml of any kind, so a project without
    the table still gets its root (for relative paths in SARIF and entries).
    """
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    nearest: Path | None = None
    for candidate_dir in (folder, *folder.parents):
        candidate = candidate_dir / "pyproject.toml"
        if not candidate.is_file():
            continue
        if nearest is None:
            nearest = candidate
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            # Broken files are reported by load_config when they are the one we use.
            continue
        if isinstance(data.get("tool"), dict) and "grist" in data["tool"]:
            return candidate
    return nearest


def load_config(pyproject: Path | None, default_root: Path) -> GristConfig:
    """Parse and validate `[tool.grist]` of ``pyproject`` (None: no config, root = ``default_root``)."""
    if pyproject is None:
        return GristConfig(root=default_root.resolve())
    where = str(pyproject)
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot read the file ({exc.strerror}); fix its permissions or pass --config"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text; save it as UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}; fix the syntax") from exc
    table = data.get("tool", {}).get("grist", {}) if isinstance(data.get("tool"), dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(
            f"{where}: [tool.grist] must be a table, like `[tool.grist]` followed by `key = value` lines"
        )
    return parse_table(table, where, pyproject.parent.resolve(), pyproject)


def parse_table(table: dict[str, Any], where: str, root: Path, source: Path | None = None) -> GristConfig:
    """Validate a `[tool.grist]` table given as a dict (the server passes client settings this way too)."""
    read = _TableReader(_normalized(table, where), where)
    fail_on = read.choice("fail-on", FAIL_ON_CHOICES, f"one of {', '.join(FAIL_ON_CHOICES)}")
    entries = read.strings("entries")
    for entry in entries:
        validate_entry(entry, where)
    select = read.codes("select") if "select" in read.values else None
    return GristConfig(
        root=root,
        source=source,
        exclude=read.strings("exclude") + read.strings("extend-exclude"),
        include=read.strings("include"),
        entries=entries,
        budget=read.number("budget", float, 0),
        fail_on=fail_on,
        seed=read.number("seed", int, 0),
        jobs=read.number("jobs", int, 1),
        timeout=read.number("timeout", float, 0),
        memory_mb=read.number("memory-mb", int, 1),
        select=select,
        ignore=read.codes("ignore"),
        per_file_ignores=read.per_file_ignores(),
        baseline=read.baseline(),
        max_input_scale=read.number("max-input-scale", float, 1),
        sandbox=read.choice("sandbox", SANDBOX_CHOICES, '"auto" or "off"'),
        executor=read.choice("executor", EXECUTOR_CHOICES, '"local" or "ray"'),
        ray_address=read.string("ray-address", '"10.0.0.5:6379"'),
        script_args=read.script_args(root),
        cache_dir=read.folder("cache-dir", root),
    )


def _normalized(table: dict[str, Any], where: str) -> dict[str, Any]:
    """The table with `snake_case` keys spelled `kebab-case`; an unknown key is an error."""
    normalized: dict[str, Any] = {}
    for key, value in table.items():
        spelled = key.replace("_", "-")
        if spelled not in _KNOWN_KEYS:
            known = ", ".join(sorted(_KNOWN_KEYS))
            raise ConfigError(f"{where}: [tool.grist] has an unknown key `{key}`; known keys: {known}")
        normalized[spelled] = value
    return normalized


@dataclass
class _TableReader:
    """Typed reads of one `[tool.grist]` table; each error names the file, the key and the fix."""

    values: dict[str, Any]
    where: str

    def strings(self, key: str) -> list[str]:
        value = self.values.get(key, [])
        if isinstance(value, str):
            # Not taken as a list of one: a key documented as a list accepts only lists, so a
            # value that is not one always says so (the same rule for every list key).
            raise ConfigError(
                f"{self.where}: [tool.grist] `{key}` must be a list of strings, got the string {value!r}; "
                f"write {key} = [{_toml_string(value)}]"
            )
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(
                f'{self.where}: [tool.grist] `{key}` must be a list of strings, like {key} = ["a", "b"]'
            )
        return list(value)

    def number(self, key: str, kind: type, minimum: float) -> Any:
        value = self.values.get(key)
        if value is None:
            return None
        # bool is an int in Python; `budget = true` is a mistake, not 1 second.
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is int:
            ok = ok and float(value).is_integer()
        if not ok or value < minimum:
            article = "an integer" if kind is int else "a number"
            raise ConfigError(
                f"{self.where}: [tool.grist] `{key}` must be {article} >= {minimum:g}, got {value!r}"
            )
        return kind(value)

    def choice(self, key: str, choices: tuple[str, ...], words: str) -> str | None:
        value = self.values.get(key)
        if value is not None and value not in choices:
            raise ConfigError(f"{self.where}: [tool.grist] `{key}` must be {words}, got {value!r}")
        return value

    def string(self, key: str, example: str) -> str | None:
        value = self.values.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(
                f"{self.where}: [tool.grist] `{key}` must be a non-empty string, like {key} = {example}"
            )
        return value

    def codes(self, key: str) -> list[str]:
        return validate_codes(self.strings(key), f"{self.where}: [tool.grist] `{key}`")

    def per_file_ignores(self) -> dict[str, list[str]]:
        per_file = self.values.get("per-file-ignores", {})
        if not isinstance(per_file, dict):
            raise ConfigError(
                f"{self.where}: [tool.grist] `per-file-ignores` must be a table of pattern = [codes], "
                f'like per-file-ignores = {{"tests/*" = ["GRIST105"]}}'
            )
        out: dict[str, list[str]] = {}
        for pattern, codes in per_file.items():
            if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                example = _toml_string(codes) if isinstance(codes, str) else '"GRIST105"'
                raise ConfigError(
                    f'{self.where}: [tool.grist] `per-file-ignores` "{pattern}" must be a list of rule codes, '
                    f"got {codes!r}; write {_toml_string(pattern)} = [{example}]"
                )
            out[pattern] = validate_codes(codes, f'{self.where}: [tool.grist] `per-file-ignores` "{pattern}"')
        return out

    def script_args(self, root: Path) -> dict[str, list[str]]:
        """`script-args = {"train.py" = ["--epochs", "1"]}`: exact script paths, relative to the
        pyproject's folder, each with a list of arguments (or one string, split as a shell would)."""
        table = self.values.get("script-args", {})
        example = 'script-args = {"train.py" = ["--epochs", "1"]}'
        if not isinstance(table, dict):
            raise ConfigError(
                f"{self.where}: [tool.grist] `script-args` must be a table of script = [arguments], like {example}"
            )
        out: dict[str, list[str]] = {}
        for script, args in table.items():
            where = f'{self.where}: [tool.grist] `script-args` "{script}"'
            out[resolve_script(script, root, where)] = script_arguments(args, where, example)
        return out

    def folder(self, key: str, root: Path) -> Path | None:
        """A folder name relative to the pyproject's folder, absolute."""
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(
                f'{self.where}: [tool.grist] `{key}` must be a folder name, like {key} = ".grist_cache"'
            )
        return (root / value).resolve()

    def baseline(self) -> str | None:
        baseline = self.values.get("baseline")
        if baseline is not None and (not isinstance(baseline, str) or not baseline):
            raise ConfigError(
                f'{self.where}: [tool.grist] `baseline` must be a file name, like baseline = "grist-baseline.json"'
            )
        return baseline


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def validate_codes(codes: list[str], where: str) -> list[str]:
    """Rule codes as written (upper-cased); an unknown one is a usage error naming ``where``."""
    # Imported here: the catalogue is the one list of codes, and config stays importable on its own.
    from grist_lsp.suppressions import rule_codes

    known = rule_codes()
    out = []
    for code in codes:
        spelled = code.strip().upper()
        if spelled not in known:
            raise ConfigError(f"{where} has an unknown rule code {code!r}; known codes: {', '.join(known)}")
        out.append(spelled)
    return out


def resolve_script(script: str, base: Path, where: str) -> str:
    """The absolute path of a `script-args` script (relative to ``base``); a usage error when
    it is no Python file there: a misspelt name would silently pass nothing."""
    path = (base / script).resolve()
    if not script.endswith(".py") or not path.is_file():
        raise ConfigError(
            f'{where}: no Python file {path}; name a script by its path relative to {base}, like "train.py"'
        )
    return str(path)


def script_arguments(args: Any, where: str, example: str) -> list[str]:
    """A script's arguments: a list of strings, or one string split as a shell would split it."""
    if isinstance(args, str):
        try:
            return shlex.split(args)
        except ValueError as exc:
            raise ConfigError(
                f"{where}: cannot split {args!r} into arguments ({exc}); write a list, like {example}"
            ) from exc
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where} must be a list of strings (numbers quoted), like {example}")
    return list(args)


def validate_entry(entry: str, where: str) -> None:
    """An entry is `FILE:FUNCTION` (the function returns the callable and its arguments)."""
    file_part, sep, func = entry.rpartition(":")
    if not sep or not file_part or not func or not func.replace(".", "_").isidentifier():
        raise ConfigError(
            f"{where}: entry {entry!r} is not FILE:FUNCTION; write it like `train.py:make_inputs`"
        )
