"""The ``grist.*`` settings the language server honours, and how they are read.

Clients hand settings over in several shapes: VS Code's ``initializationOptions``
(``{"settings": {"grist": {...}}, "workspaceTrusted": false}`` or the ``grist``
section itself), ``workspace/configuration`` answers for section ``grist``
(``{"enable": ..., "dynamic": {"enable": ...}}``), ``didChangeConfiguration``
payloads (``{"grist": {...}}``), and flat dotted keys (``{"grist.budget": 5}``).
``merge_settings`` accepts all of them and ignores what it does not understand,
so a malformed payload never stops the server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from grist_lsp.defaults import default, server_settings

# Settings that change what the dynamic engine does: a change invalidates its runs.
DYNAMIC_FIELDS = ("dynamic_enable", "budget", "entries", "trusted", "timeout")


@dataclass(frozen=True)
class Settings:
    """Effective ``grist.*`` settings for the whole server; defaults from ``grist_lsp/defaults.py``.

    ``budget``, ``entries`` and ``timeout`` are below `[tool.grist]` (see ``service.py``): the
    server hands them to the service as the editor's values.
    """

    enable: bool = default("enable")  # grist.enable: any diagnostics at all
    dynamic_enable: bool = default("dynamic_enable")  # grist.dynamic.enable: may run the user's code
    budget: float = default("budget")  # grist.budget: seconds of search per possible site
    entries: tuple[str, ...] = default("entries")  # grist.entries: "file.py:function"
    show_possible: bool = default("show_possible")  # grist.showPossible
    show_safe: bool = default("show_safe")  # grist.showSafe (as hints)
    trusted: bool = True  # grist.trusted; can only take trust away, never grant it
    debounce: float = default("debounce")  # grist.dynamic.debounce: seconds of quiet before a run
    timeout: float = default("timeout")  # grist.dynamic.timeout: seconds for the program to reach its sites
    # grist.reproducerDir: where "Create reproducer test" writes, from the workspace root
    reproducer_dir: str = default("reproducer_dir")

    def dynamic_allowed(self, client_trusts_workspace: bool) -> bool:
        """Whether the user's code may run: enabled, and trusted by both client and setting."""
        return self.enable and self.dynamic_enable and self.trusted and client_trusts_workspace

    def engine_key(self) -> tuple[Any, ...]:
        """What a cached dynamic result depends on besides the text (and the project's config)."""
        return (self.budget, self.entries, self.timeout)

    def editor_values(self) -> dict[str, Any]:
        """The values the service takes from the editor (below `[tool.grist]`)."""
        return {"budget": self.budget, "entries": list(self.entries), "timeout": self.timeout}


# flat key (without "grist.") -> (field, converter)
def _as_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() not in ("false", "0", "no", "off", "")
    return bool(v)


def _as_budget(v: Any) -> float:
    budget = float(v)
    if budget != budget or budget < 0:  # NaN or negative: the user meant "no search"
        return 0.0
    return budget


def _as_timeout(v: Any) -> float:
    timeout = float(v)
    if not timeout > 0:  # 0, negative or NaN: a program needs some time to start
        raise ValueError(f"grist.dynamic.timeout must be > 0, not {v!r}")
    return timeout


def _as_entries(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    return tuple(str(e) for e in v if str(e).strip())


def _as_folder(v: Any) -> str:
    folder = str(v).strip()
    if not folder:
        raise ValueError("grist.reproducerDir is empty")  # keeps the previous folder
    return folder


# How each setting's value is read; its key ("grist." + key) comes from the defaults table.
_CONVERTERS: dict[str, Any] = {
    "enable": _as_bool,
    "dynamic_enable": _as_bool,
    "debounce": _as_budget,
    "timeout": _as_timeout,
    "budget": _as_budget,
    "entries": _as_entries,
    "show_possible": _as_bool,
    "show_safe": _as_bool,
    "reproducer_dir": _as_folder,
}

# flat key (without "grist.") -> (field, converter). "trusted" is no table option: a workspace's
# settings file may take trust away through it, and no editor should offer it as a preference.
_FLAT: dict[str, tuple[str, Any]] = {
    **{key: (option.name, _CONVERTERS[option.name]) for key, option in server_settings().items()},
    "trusted": ("trusted", _as_bool),
}


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """``{"dynamic": {"enable": x}}`` -> ``{"dynamic.enable": x}``."""
    out: dict[str, Any] = {}
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        out[name] = value
    return out


def grist_section(obj: Any) -> dict[str, Any]:
    """The ``grist`` section of any accepted payload, flattened to dotted keys."""
    flat = _flatten(obj)
    section: dict[str, Any] = {}
    # The section itself ({"enable": ...}) or nested under "grist"/"settings.grist".
    for key, value in flat.items():
        for prefix in ("settings.grist.", "grist.", "settings.", ""):
            if key.startswith(prefix) and key[len(prefix) :] in _FLAT:
                name = key[len(prefix) :]
                # A more specific spelling wins over the bare one.
                if prefix or name not in section:
                    section[name] = value
                break
    return section


def merge_settings(base: Settings, payload: Any) -> Settings:
    """``base`` with every recognised ``grist.*`` value of ``payload`` applied."""
    changes: dict[str, Any] = {}
    for name, value in grist_section(payload).items():
        field, convert = _FLAT[name]
        if value is None:
            continue
        try:
            changes[field] = convert(value)
        except (TypeError, ValueError):
            continue  # a bad value keeps the previous one
    return dataclasses.replace(base, **changes) if changes else base


def client_trust(payload: Any) -> bool | None:
    """What the client says about workspace trust in ``payload``, or None if it says nothing.

    ``workspaceTrusted`` is the client's own statement (the VS Code extension puts it
    beside the ``grist`` values in every payload); it is not a user setting, so a
    workspace's settings file cannot grant trust through it.
    """
    flat = _flatten(payload)
    for prefix in ("", "settings.", "grist.", "settings.grist."):
        value = flat.get(f"{prefix}workspaceTrusted")
        if value is not None and not isinstance(value, dict):
            return _as_bool(value)
    return None
