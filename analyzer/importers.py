"""Which project files import a module: the tests and scripts the engine may enter it through.

Torch-free, so that both the engine's worker (``dynamic/entries.py``: which tests and scripts
to run) and the parent's result cache (``grist_lsp/cache.py``: which files' bytes a file's
results depend on) ask the same question the same way. Reading is the caller's: the cache
reads each project file once per run, the worker reads from disk.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

from grist_lsp.analyzer.programs import is_test_file

# Folders no project imports its own modules from (environments, caches, build output).
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".tox", "build", "dist"}
)

Reader = Callable[[str], "str | None"]


def read_source(path: str) -> str | None:
    """The file's text, None when it cannot be read as UTF-8."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def python_files(root: str, tests: bool | None, limit: int | None = 300) -> list[str]:
    """The project's test files (``tests``), its other Python files (not ``tests``), or all of
    them (None), in a stable order, at most ``limit``."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        for f in sorted(files):
            if f.endswith(".py") and (tests is None or is_test_file(f) == tests):
                found.append(os.path.join(d, f))
                if limit is not None and len(found) >= limit:
                    return found
    return found


def import_pattern(path: str, root: str, read: Reader = read_source) -> re.Pattern[str]:
    """Matches a line that imports the module of ``path`` (``import x.stem``, ``from x.stem import``),
    or a package that re-exports it (``from pkg.losses import f``, ``pkg/losses/__init__.py``
    importing ``.some_loss``): the way a project's tests most often reach its library code."""
    return _names_pattern(import_names(path, root, read))


def import_names(path: str, root: str, read: Reader = read_source) -> list[str]:
    """The names an import of ``path``'s module spells (its stem, and each package above it
    that re-exports it): a file that imports it has one of them as a word on an import line."""
    names = [os.path.splitext(os.path.basename(path))[0]]
    folder = os.path.dirname(os.path.abspath(path))
    top = os.path.abspath(root)
    while folder.startswith(top) and folder != top:
        src = read(os.path.join(folder, "__init__.py"))
        if src is None or not _names_pattern(names).search(src):
            break
        names.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    return names


def _names_pattern(names: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(
        rf"^\s*(from\s+[\w.]*\b(?:{alternatives})\b[\w.]*\s+import|import\s+[\w.]*\b(?:{alternatives})\b)",
        re.M,
    )


def importers(
    path: str, files: list[str], root: str, read: Reader = read_source
) -> Iterator[tuple[str, str]]:
    """(file, source) of the ``files`` that import the module of ``path`` (not ``path`` itself)."""
    pattern = import_pattern(path, root, read)
    target = os.path.realpath(path)
    for f in files:
        src = read(f)
        # The pattern first: resolving every file's links costs more than reading it.
        if src is not None and pattern.search(src) and os.path.realpath(f) != target:
            yield f, src
