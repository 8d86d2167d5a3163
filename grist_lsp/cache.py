"""The result cache: what a cache key is made of, where entries live, atomic writes.

A file's dynamic results (its verdicts with their witnesses and verified fixes, and the
warnings its check said) are stored under a key of everything they depend on, so a file
that did not change since the last check costs a hash instead of a search:

* the file's text, and the static verdicts the engine was given (they carry the project's
  suppressions, rule selection and baseline: what the engine searched at all);
* the bytes of every project file the engine may run for it: the files it imports,
  transitively (``discovery.imported_modules``); the test files and the scripts that import it
  (``analyzer/importers.py``, the engine's own question), or the one program it is entered
  through (``via``); the explicit entries' files; and, again, what each of those imports;
* the options that change results (``ResultOptions``), the grist-lsp version and a digest of
  its own source (a development checkout changes without a version bump), and the torch and
  Python versions. torch's version is read from its installed metadata: a cached run never
  imports torch.

Entries live in ``<cache-dir>/<context>/<key>.json``, ``<context>`` being the digest of the
versions and options: a run under a context the cache has never seen is ``cold`` (the CLI then
starts its workers early, before it knows which files miss). The cache folder (by default
``.grist_cache`` at the project root) holds a ``.gitignore`` of ``*`` and a ``CACHEDIR.TAG``,
as ruff's does. Every write goes to a temporary file in the same folder, then ``os.replace``:
two checks at once, or a check killed mid-write, leave whole entries only. An entry that does
not parse, holds another key, or names a witness payload or reproducer that is gone is a miss
(and is rewritten by the check that follows), never an error.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grist_lsp import __version__
from grist_lsp.analyzer.importers import import_names, importers, python_files
from grist_lsp.analyzer.programs import is_script, is_test_file
from grist_lsp.discovery import imported_modules
from grist_lsp.model import NOT_REPLAYED, Status, TensorValue, Verdict, Witness, to_json, verdict_from_json

FORMAT = 1  # of an entry file; a new one makes a new context, so old entries are never read
DEFAULT_FOLDER = ".grist_cache"
GITIGNORE = "# Created by grist-lsp: its result cache, never to be committed.\n*\n"
# https://bford.info/cachedir/: backup tools skip a folder holding this file.
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by grist-lsp.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
_IMPORT_LINE = re.compile(r"^\s*(?:from|import)\b.*$", re.M)
_WORD = re.compile(r"\w+")


@dataclass
class ResultOptions:
    """The options a file's dynamic results depend on, ``EngineOptions`` field by field.

    Not here, on purpose: ``jobs`` (a site's result never depends on how many workers share the
    file: ``dynamic/engine.py``), ``sandbox_probe`` (how the sandbox was found, not what it
    is), ``via`` (per file: part of the key). ``max_input_scale`` is the service's
    (``policy.after_engine``), applied before results are stored.
    """

    budget: float
    seed: int
    entries: list[str]  # absolute FILE:FUNCTION
    script_args: dict[str, list[str]]
    project_root: str
    timeout: float  # a slower start-up limit can turn a confirmation into a timeout
    memory_mb: int
    write_reproducers: str | None  # witnesses name the reproducer files written there
    sandbox: str
    max_input_scale: float | None


@dataclass
class Cached:
    """One file's stored results: its verdicts and the warnings its check said."""

    verdicts: list[Verdict]
    notes: list[str] = field(default_factory=list)


@functools.cache
def _source_digest() -> str:
    """A digest of grist-lsp's own source files (read once per process: they do not change under it)."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(folder) / name
                digest.update(str(path.relative_to(package)).encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def versions() -> dict[str, str | None]:
    """What the results were computed with, besides the options."""
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    return {
        "grist-lsp": __version__,
        "source": _source_digest(),
        "torch": torch,
        "python": sys.version.split()[0],
    }


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class _ProjectFiles:
    """The project's files as one run reads them: each one read, and its imports found, once."""

    root: Path
    _bytes: dict[str, bytes | None] = field(default_factory=dict)
    _imports: dict[str, list[Path]] = field(default_factory=dict)
    _lines: dict[str, str | None] = field(default_factory=dict)
    _words: dict[str, list[int]] | None = None  # word of an import line -> indexes in all_files
    _all: list[str] | None = None

    def data(self, path: str) -> bytes | None:
        if path not in self._bytes:
            try:
                self._bytes[path] = Path(path).read_bytes()
            except OSError:
                self._bytes[path] = None
        return self._bytes[path]

    def text(self, path: str) -> str | None:
        data = self.data(path)
        try:
            return None if data is None else data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def import_lines(self, path: str) -> str | None:
        """Only the lines that start with ``import``/``from``: all an importer's pattern can
        match (it is anchored there), so a whole project is searched in milliseconds."""
        if path not in self._lines:
            text = self.text(path)
            self._lines[path] = None if text is None else "\n".join(_IMPORT_LINE.findall(text))
        return self._lines[path]

    def imports(self, path: str, text: str | None = None) -> list[Path]:
        if text is not None:
            return imported_modules(Path(path), text, self.root)
        if path not in self._imports:
            own = self.text(path)
            self._imports[path] = [] if own is None else imported_modules(Path(path), own, self.root)
        return self._imports[path]

    def all_files(self) -> list[str]:
        if self._all is None:
            self._all = python_files(str(self.root), tests=None, limit=None)
        return self._all

    def may_import(self, names: list[str]) -> list[str]:
        """The project files with one of ``names`` as a word on an import line, in walk order: the
        only ones an importer's pattern can match, found without searching every file for every
        module (a project of N files would cost N x N searches)."""
        if self._words is None:
            self._words = {}
            for index, path in enumerate(self.all_files()):
                for word in set(_WORD.findall(self.import_lines(path) or "")):
                    self._words.setdefault(word, []).append(index)
        found = sorted({i for name in names for i in self._words.get(name, [])})
        return [self.all_files()[i] for i in found]


class ResultCache:
    """The cache of one project under one set of options (see the module docstring)."""

    def __init__(self, folder: Path, root: Path, options: ResultOptions) -> None:
        self.folder = folder
        self.root = root.resolve()
        self.options = options
        self.context = _digest({"format": FORMAT, "versions": versions(), "options": to_json(options)})
        self._files = _ProjectFiles(self.root)

    @property
    def entries(self) -> Path:
        return self.folder / self.context[:32]

    def cold(self) -> bool:
        """No result was ever stored under these versions and options."""
        return not self.entries.is_dir()

    # --- keys ------------------------------------------------------------------

    def depends_on(self, path: str, text: str, via: str | None = None) -> list[str]:
        """Every file besides ``path`` whose bytes its results depend on (module docstring), sorted."""
        files = self._files
        target = str(Path(path).resolve())
        programs = [e.rpartition(":")[0] for e in self.options.entries]
        if via is not None:
            programs.append(str(Path(via).resolve()))
        else:
            # What the worker enters a module through: the tests and the scripts that import it
            # (a library module importing it runs nothing, so editing one re-checks only itself).
            candidates = files.may_import(import_names(target, str(self.root), files.import_lines))
            programs.extend(
                f
                for f, _ in importers(target, candidates, str(self.root), files.import_lines)
                if is_test_file(os.path.basename(f)) or is_script(files.text(f) or "")
            )
        seen = {target}
        todo = [str(p) for p in files.imports(target, text)] + [str(Path(p).resolve()) for p in programs]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            todo.extend(str(p) for p in files.imports(current))
        return sorted(seen - {target})

    def key(self, path: str, text: str, static: list[Verdict], via: str | None = None) -> str:
        """The key of ``path``'s results when its text is ``text`` and the static pass gave ``static``."""
        depends = {
            p: (hashlib.sha256(d).hexdigest() if (d := self._files.data(p)) is not None else None)
            for p in self.depends_on(path, text, via)
        }
        return _digest(
            {
                "context": self.context,
                "file": str(Path(path).resolve()),
                "text": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
                "static": to_json(static),
                "via": via,
                "depends": depends,
            }
        )

    # --- entries ---------------------------------------------------------------

    def lookup(self, key: str) -> Cached | None:
        """The results stored under ``key``; None when there are none, or none that can be used."""
        try:
            with open(self.entries / f"{key}.json", encoding="utf-8") as handle:
                data = json.load(handle)
            if data.get("format") != FORMAT or data.get("key") != key:
                return None
            cached = Cached(
                verdicts=[verdict_from_json(v) for v in data["verdicts"]],
                notes=[str(n) for n in data.get("notes", [])],
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None  # absent, or cut short / edited by hand: the check runs and rewrites it
        if not all(os.path.exists(f) for v in cached.verdicts for f in _files_named(v.witness)):
            return None  # a payload or reproducer was deleted: the witness could not be replayed
        return cached

    def store(self, key: str, path: str, cached: Cached) -> None:
        """Write ``cached`` under ``key``, atomically. Raises OSError when the folder is not writable."""
        self._prepare()
        data = {
            "format": FORMAT,
            "key": key,
            "file": str(Path(path).resolve()),
            "verdicts": [to_json(v) for v in cached.verdicts],
            "notes": list(cached.notes),
        }
        _write_atomically(self.entries / f"{key}.json", json.dumps(data))

    def _prepare(self) -> None:
        self.entries.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
            if not (self.folder / name).exists():
                _write_atomically(self.folder / name, text)


def cacheable(verdicts: list[Verdict]) -> bool:
    """Whether results may be stored: not when the program could not be run, nor when a witness
    did not replay, since what got in the way (a timeout on a busy machine, a missing package or
    data file) is outside the key: the next check tries again."""
    return not any(v.status is Status.ERROR or NOT_REPLAYED in v.reason for v in verdicts)


def _files_named(witness: Witness | None) -> list[str]:
    if witness is None:
        return []
    values: list[TensorValue | None] = [
        *witness.inputs.values(),
        witness.operand,
        *witness.weight_deltas.values(),
        *witness.weight_values.values(),
    ]
    named = [v.file for v in values if v is not None and v.file]
    return named + [f for f in (witness.payload, witness.reproducer) if f]


def _write_atomically(target: Path, text: str) -> None:
    handle = tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            handle.write(text)
        os.chmod(handle.name, 0o644)  # as a plain write would leave it: a CI cache is shared by users
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
