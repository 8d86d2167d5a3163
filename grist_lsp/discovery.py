"""Find the Python files to check under the paths a user named.

Folders are walked with `.gitignore` files honoured (each one relative to its
own folder, nested ones included, as git does), plus the `exclude` patterns of
`[tool.grist]` (gitignore syntax, relative to the config's folder) and a few
folders nobody wants checked (.git, virtualenvs, caches). Files named
explicitly are checked even when excluded, unless ``force_exclude`` is set —
ruff's rule, which a pre-commit hook (that names every staged file) needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

# Folders skipped everywhere: version control, environments and caches hold
# third-party code or none, and walking a virtualenv costs seconds.
DEFAULT_EXCLUDES = (
    ".git/",
    ".hg/",
    ".svn/",
    "__pycache__/",
    ".venv/",
    "venv/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".ipynb_checkpoints/",  # Jupyter's autosaved copies of the notebooks beside them
    ".grist-cache/",
    "node_modules/",
    "site-packages/",
    "*.egg-info/",
    "build/",
    "dist/",
)
DEFAULT_INCLUDE = ("*.py", "*.ipynb")


class PathNotFound(Exception):
    """A path given on the command line does not exist."""


@dataclass
class Discovery:
    """What to walk and what to skip. Patterns are gitignore syntax relative to ``root``."""

    root: Path
    exclude: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    force_exclude: bool = False
    respect_gitignore: bool = True


def _spec(lines: list[str] | tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _read_gitignore(folder: Path) -> pathspec.GitIgnoreSpec | None:
    path = folder / ".gitignore"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return _spec(lines) if lines else None


def _relative(path: Path, base: Path) -> str | None:
    try:
        rel = path.relative_to(base)
    except ValueError:
        return None
    return rel.as_posix()


class _Matcher:
    """Answers "is this path ignored?" for one discovery run, caching `.gitignore` reads."""

    def __init__(self, discovery: Discovery) -> None:
        self.root = discovery.root.resolve()
        self.exclude_lines = list(DEFAULT_EXCLUDES) + list(discovery.exclude)
        self.exclude = _spec(self.exclude_lines)
        self.include = _spec(discovery.include or list(DEFAULT_INCLUDE))
        self.respect_gitignore = discovery.respect_gitignore
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self.git_root = _git_root(self.root)

    def _gitignore(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._gitignores:
            self._gitignores[folder] = _read_gitignore(folder)
        return self._gitignores[folder]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        suffix = "/" if is_dir else ""
        rel = _relative(path, self.root)
        if rel is not None and rel != "." and self.exclude.match_file(rel + suffix):
            return True
        # Default excludes apply by name even outside the config root.
        if self.exclude.match_file(path.name + suffix) and rel is None:
            return True
        if self.respect_gitignore:
            # Every .gitignore from the repository root down to the path's folder
            # applies, each to paths relative to its own folder; a later (deeper)
            # decision wins, like git's own precedence.
            top = self.git_root or self.root
            chain = [
                folder
                for folder in (path.parent, *path.parent.parents)
                if folder == top or _relative(folder, top) is not None
            ]
            decision: bool | None = None
            for folder in reversed(chain):
                spec = self._gitignore(folder)
                rel = _relative(path, folder)
                if spec is None or rel is None:  # rel: never None, the path lies under every folder of chain
                    continue
                result = spec.check_file(rel + suffix)
                if result.include is not None:
                    decision = result.include
            if decision:
                return True
        return False

    def scoped(self, start: Path) -> _Matcher:
        """This matcher for walking a folder the user named: patterns that exclude the
        folder itself (or a folder above it) are dropped, or naming it would find nothing."""
        rel = _relative(start, self.root)
        if rel in (None, "."):
            return self
        prefixes = [rel]
        parent = start.parent
        while (up := _relative(parent, self.root)) is not None and up != ".":
            prefixes.append(up)
            parent = parent.parent
        kept = [
            line
            for line in self.exclude_lines
            if line.startswith("!") or not any(_spec([line]).match_file(p + "/") for p in prefixes)
        ]
        if len(kept) == len(self.exclude_lines):
            return self
        clone = object.__new__(_Matcher)
        clone.__dict__.update(self.__dict__)
        clone.exclude_lines = kept
        clone.exclude = _spec(kept)
        return clone

    def included(self, path: Path) -> bool:
        rel = _relative(path, self.root) or path.name
        return self.include.match_file(rel) or self.include.match_file(path.name)


def own_path(file: str | Path) -> Path:
    """``file`` absolute, its folders resolved (a symlinked project folder is the same project)
    but its own name kept: a symlinked file, a dangling one included, is reported, matched and
    fingerprinted under the name the folder shows, not its target's."""
    path = Path(os.path.abspath(file))
    return path.parent.resolve() / path.name


def _git_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def discover(paths: list[str], discovery: Discovery) -> list[Path]:
    """Absolute paths of the files to check, sorted, without duplicates.

    Raises ``PathNotFound`` naming the first path that does not exist.
    """
    matcher = _Matcher(discovery)
    found: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise PathNotFound(f"{raw}: no such file or directory; check the path")
        path = path.resolve()
        if path.is_file():
            if discovery.force_exclude and _excluded_with_parents(path, matcher):
                continue
            found[path] = None
            continue
        if discovery.force_exclude and _excluded_with_parents(path, matcher, is_dir=True):
            continue
        walker = matcher.scoped(path)
        for folder, dirnames, filenames in os.walk(path):
            here = Path(folder)
            # Prune in place so os.walk never descends into excluded folders.
            dirnames[:] = sorted(d for d in dirnames if not walker.ignored(here / d, is_dir=True))
            for name in sorted(filenames):
                file = here / name
                if walker.included(file) and not walker.ignored(file, is_dir=False):
                    found[file] = None
    return sorted(found)


def _excluded_with_parents(path: Path, matcher: _Matcher, is_dir: bool = False) -> bool:
    """For force-exclude: a path is excluded if it or any folder above it (within the root) is."""
    if matcher.ignored(path, is_dir=is_dir):
        return True
    for parent in path.parents:
        if _relative(parent, matcher.root) in (None, "."):
            break
        if matcher.ignored(parent, is_dir=True):
            return True
    return False


def imported_modules(path: Path, text: str, root: Path) -> list[Path]:
    """The project's own modules that ``path`` imports directly (its folder, the project root and
    ``src/`` are where imports resolve, as the engine's workers set ``sys.path``), and those a
    package it imports re-exports (``from pkg.losses import f`` runs ``pkg/losses/some_loss.py``
    through ``pkg/losses/__init__.py``): the modules a test or script runs, where its check also
    looks for bugs. Third-party modules (anything outside ``root``) are never listed."""
    found = _direct_imports(path, text, root)
    for module in found:  # grows while it is read: packages' own imports, each file once
        if module.name != "__init__.py":
            continue
        try:
            init_text = module.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for inner in _direct_imports(module, init_text, root):
            if inner not in found and inner != path.resolve():
                found.append(inner)
    return found


def imports_into(path: Path, text: str, root: Path, target: Path) -> bool:
    """Whether running ``path`` may load the project module ``target``: one of its imports
    resolves to it (directly or through a re-exporting package), or one of them resolves nowhere,
    neither in the project nor among installed modules (a folder the file puts on ``sys.path``
    itself), so it may. ``from app.model import X`` does not load ``gpt/model.py``."""
    target = target.resolve()
    if target in imported_modules(path, text, root):
        return True
    import importlib.util

    root = root.resolve()
    bases = _import_bases(path, root)
    # Only an import that could name the target counts: its stem, or a folder on its way up.
    own = {target.stem, *(p.name for p in target.parents if p.is_relative_to(root) and p != root)}
    for module in _imported_names(path, text, root)[0]:
        if own.isdisjoint(module.split(".")):
            continue
        top = module.split(".")[0]
        if any((b / top).is_dir() or (b / f"{top}.py").is_file() for b in bases):
            continue
        try:
            if importlib.util.find_spec(top) is not None:
                continue
        except (ImportError, ValueError):
            pass
        return True
    return False


def _import_bases(path: Path, root: Path) -> list[Path]:
    """Where the engine's workers resolve a file's imports: its folder, the root, ``src/``."""
    return [path.parent.resolve(), root, root / "src"]


def _imported_names(path: Path, text: str, root: Path) -> tuple[list[str], list[str]]:
    """(modules a file imports, those plus ``module.name`` for each ``from module import name``),
    relative imports made absolute from ``root``."""
    import ast

    from grist_lsp.analyzer.parsing import UNPARSABLE, parse

    try:
        tree = parse(text)
    except UNPARSABLE:
        return [], []
    modules: list[str] = []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.extend(a.name for a in node.names)
            names.extend(a.name for a in node.names)
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module
        if node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            if not base.is_relative_to(root):
                continue
            prefix = ".".join(base.relative_to(root).parts)
            module = ".".join(p for p in (prefix, node.module or "") if p)
        if not module:
            continue
        if not node.level:
            modules.append(module)
        names.append(module)
        names.extend(f"{module}.{a.name}" for a in node.names)
    return modules, names


def _direct_imports(path: Path, text: str, root: Path) -> list[Path]:
    names = _imported_names(path, text, root)[1]
    root = root.resolve()
    bases = _import_bases(path, root)
    found: list[Path] = []
    for name in dict.fromkeys(names):
        parts = name.split(".")
        for base in bases:
            for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
                if (
                    candidate.is_file()
                    and candidate.resolve().is_relative_to(root)
                    and candidate.resolve() != path.resolve()
                    and candidate.resolve() not in found
                ):
                    found.append(candidate.resolve())
    return found
