"""Expectation markers for the example and corpus programs, and an independent oracle.

A marker is a trailing comment on the line of an unsafe op::

    loss = -(onehot * torch.log(probs)).sum(1).mean()  # expect: confirmed log, possible mean

One ``<status> <kind>`` pair per unsafe site on that line (kinds are the
catalogue's: log, div, sqrt, exp, pow, acos, atanh, lgamma, var, mean ...).
When a line holds two sites of the same kind, the pairs are listed in the order
the sites start on the line (outer expression first when they start together).

Statuses:

* ``confirmed``: a real bug; some finite input (or a bounded weight move) drives
  this exact op to NaN/INF. Every one is checked by hand in
  tests/test_corpus_markers.py with an input of our own choosing.
* ``possible``: a real risk the engine may legitimately not reach (e.g. only with
  an empty batch, or an input real data never holds); the comment above the line
  says why. The engine may confirm it or leave it open; both are accepted.
* ``safe``: cannot fail, and the static pass's range facts (clamp, + eps on a
  non-negative value, softmax/sigmoid/exp ranges, safe keywords) prove it.
* ``unproven``: cannot fail either, but only for reasons beyond the static
  range facts (e.g. the exponent of exp is a cosine in [-1, 1]); statically
  ``possible`` is expected, and the engine must never confirm it.

This module also holds ``NonFiniteOracle``: a TorchFunctionMode that records, for
one program file, every catalogue op evaluated with all-finite operands whose
output is not finite (the same oracle DESIGN.md gives the engine). The hand
witnesses use it to prove each ``confirmed`` marker honest without the engine.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grist_lsp.analyzer.catalogue import KINDS, lookup

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
PROGRAMS = REPO / "tests" / "corpus" / "programs"

STATUSES = ("confirmed", "possible", "safe", "unproven")
_MARKER = re.compile(r"#\s*expect:\s*(?P<body>.*)$")
_PAIR = re.compile(r"(?P<status>[a-z]+)\s+(?P<kind>[a-z0-9_]+)")  # one item of a comma list


@dataclass(frozen=True)
class Marker:
    file: str
    line: int
    status: str
    kind: str
    order: int  # position among same-kind markers on the line


def parse_markers(path: str | Path) -> list[Marker]:
    """Every ``# expect:`` pair of a file. Raises ValueError on a malformed marker."""
    path = Path(path)
    out: list[Marker] = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        m = _MARKER.search(line)
        if not m:
            continue
        # Every comma-separated item must be one '<status> <kind>' pair: a mistyped status or a
        # stray word is an error, never an item dropped without a word.
        pairs = []
        for item in m.group("body").split(","):
            pair = _PAIR.fullmatch(item.strip())
            if pair is None:
                raise ValueError(f"{path}:{lineno}: '# expect:' item {item.strip()!r} is not '<status> <kind>'")
            if pair["status"] not in STATUSES:
                raise ValueError(f"{path}:{lineno}: unknown status {pair['status']!r} (statuses: {STATUSES})")
            pairs.append((pair["status"], pair["kind"]))
        seen: dict[str, int] = {}
        for status, kind in pairs:
            if kind not in KINDS:
                raise ValueError(f"{path}:{lineno}: unknown kind {kind!r} (catalogue kinds: {sorted(KINDS)})")
            out.append(Marker(str(path), lineno, status, kind, seen.get(kind, 0)))
            seen[kind] = seen.get(kind, 0) + 1
    return out


def program_files() -> list[Path]:
    """Every marked program: examples/ and tests/corpus/programs/ (pytest files beside them excluded)."""
    files = sorted(EXAMPLES.glob("*.py")) + sorted(PROGRAMS.glob("*.py"))
    return [f for f in files if not f.name.startswith("test_") and f.name != "__init__.py"]


def load_module(path: str | Path, name: str | None = None):
    """Import a program file as a fresh module (its ``__main__`` block does not run)."""
    path = Path(path)
    name = name or f"corpus_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the oracle --------------------------------------------------------------

def _all_finite(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return True
        return bool(torch.isfinite(value).all())
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_all_finite(v) for v in value)
    return True


def _oracle_class():
    import torch
    from torch.overrides import TorchFunctionMode, resolve_name

    class NonFiniteOracle(TorchFunctionMode):
        """Records (line, kind) of catalogue ops in ``path`` that turn finite operands into NaN/INF."""

        def __init__(self, path: str | Path, stop_when: set[tuple[int, str]] | None = None,
                     stop_first: bool = False):
            super().__init__()
            self.path = str(Path(path).resolve())
            self.events: list[tuple[int, str, str, str]] = []  # (line, kind, op, "nan"/"inf"/"-inf")
            # Long-running scripts are stopped as soon as every wanted (line, kind) fired.
            self.stop_when = set(stop_when or ())
            self.stop_first = stop_first  # stop at the first NaN/INF: what the program hits on its own

        def _line(self) -> int | None:
            frame = sys._getframe(2)
            while frame is not None:
                if frame.f_code.co_filename == self.path:
                    return frame.f_lineno
                frame = frame.f_back
            return None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                name = resolve_name(func)
            except Exception:  # some wrappers have no public name
                name = None
            row = lookup(name)[0] if name and lookup(name) else None
            # in-place ops overwrite their operand: judge the operands before the call
            finite_before = row is not None and _all_finite(args) and _all_finite(list(kwargs.values()))
            out = func(*args, **kwargs)
            if row is not None and finite_before:
                outs = out if isinstance(out, tuple) else (out,)
                for o in outs:
                    if isinstance(o, torch.Tensor) and o.is_floating_point() and not bool(torch.isfinite(o).all()):
                        line = self._line()
                        if line is not None:
                            bad = o[~torch.isfinite(o)].flatten()[0].item() if o.numel() else float("nan")
                            result = "nan" if math.isnan(bad) else ("inf" if bad > 0 else "-inf")
                            self.events.append((line, row.kind, name, result))
                            if self.stop_first or (self.stop_when and self.stop_when <= self.fired()):
                                raise WitnessReached(self.fired())
                        break
            return out

        def fired(self) -> set[tuple[int, str]]:
            return {(line, kind) for line, kind, _, _ in self.events}

    return NonFiniteOracle


class WitnessReached(Exception):
    """Raised by the oracle to stop a program once every wanted site fired."""


def oracle(path: str | Path, stop_when: set[tuple[int, str]] | None = None, stop_first: bool = False):
    """A fresh NonFiniteOracle for one program file (use as a context manager)."""
    return _oracle_class()(path, stop_when, stop_first)


def first_nonfinite(path: str | Path) -> tuple[int, str, str, str] | None:
    """Run a script as ``__main__`` under the oracle; the first (line, kind, op, result) it hits, or None."""
    import runpy

    path = Path(path).resolve()
    o = oracle(path, stop_first=True)
    try:
        with o:
            runpy.run_path(str(path), run_name="__main__")
    except WitnessReached:
        pass
    return o.events[0] if o.events else None


def run_variant(path: str | Path, replacements: dict[str, str], stop_when: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Run a script with some of its constants changed (its inputs), under the oracle.

    Each replacement must keep the line count, so the oracle's line numbers are the
    file's. The script runs as ``__main__`` and is stopped once ``stop_when`` fired.
    Returns the (line, kind) pairs that produced NaN/INF from finite operands.
    """
    path = Path(path).resolve()
    text = path.read_text()
    for old, new in replacements.items():
        if text.count(old) != 1 or old.count("\n") != new.count("\n"):
            raise ValueError(f"{path.name}: replacement {old!r} must occur once and keep the line count")
        text = text.replace(old, new)
    code = compile(text, str(path), "exec")
    o = oracle(path, stop_when)
    try:
        with o:
            exec(code, {"__name__": "__main__", "__file__": str(path)})
    except WitnessReached:
        pass
    return o.fired()


# --- matching markers to verdicts ----------------------------------------------

@dataclass
class Match:
    """One marker paired with the verdict of the site it describes (either may be None)."""

    file: str
    line: int
    kind: str
    marker: Marker | None
    verdict: Any  # grist_lsp.model.Verdict | None

    @property
    def col(self) -> int | None:
        return self.verdict.site.span.start_col if self.verdict is not None else None


def match_markers(path: str | Path, verdicts: list) -> list[Match]:
    """Pair each marker with a site on its line and of its kind.

    Sites of one kind on one line are taken in the order they start (outer
    expression first when two start together), the order markers are written in.
    Error verdicts (whole-file problems) are not sites and are ignored here.
    """
    markers = parse_markers(path)
    by_key: dict[tuple[int, str], list] = {}
    for v in verdicts:
        if str(v.status) == "error" or not v.site.kind or v.site.kind == "error":
            continue
        by_key.setdefault((v.site.span.start_line, v.site.kind), []).append(v)
    for vs in by_key.values():
        vs.sort(key=lambda v: (v.site.span.start_col, -v.site.span.end_line, -v.site.span.end_col))
    marks: dict[tuple[int, str], list[Marker]] = {}
    for m in markers:
        marks.setdefault((m.line, m.kind), []).append(m)
    out: list[Match] = []
    for key in sorted(set(by_key) | set(marks)):
        vs, ms = by_key.get(key, []), marks.get(key, [])
        for i in range(max(len(vs), len(ms))):
            out.append(Match(str(path), key[0], key[1], ms[i] if i < len(ms) else None, vs[i] if i < len(vs) else None))
    return out


def static_problems(matches: list[Match]) -> list[str]:
    """What the static pass gets wrong against the markers, one sentence each (empty: all agree)."""
    problems = []
    for m in matches:
        where = f"{Path(m.file).name}:{m.line} {m.kind}"
        status = str(m.verdict.status) if m.verdict is not None else None
        if m.marker is None:
            if status == "possible":
                problems.append(f"{where}: static 'possible' site without a marker")
            continue
        want = m.marker.status
        if m.verdict is None:
            if want != "safe":
                problems.append(f"{where}: marked {want} but the static pass reports no such site")
            continue
        if want in ("confirmed", "possible") and status != "possible":
            problems.append(f"{where}: marked {want}, static says {status} ({m.verdict.reason})")
        elif want == "safe" and status != "safe":
            problems.append(f"{where}: marked safe, static says {status} ({m.verdict.reason})")
        elif want == "unproven" and status not in ("possible", "safe"):
            problems.append(f"{where}: marked unproven, static says {status}")
    return problems


# --- twin folders (NAME.py with a bug, NAME_fixed.py repaired) ---------------------------------


def twin_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """Every program of a twin folder, and the bug twins among them."""
    twins = sorted(folder.glob("*.py"))
    return twins, [p for p in twins if not p.stem.endswith("_fixed")]


def missing_twins(twins: list[Path], kind: str, at_least: int = 6) -> list[str]:
    """What a twin folder lacks for ``kind``: ``at_least`` bug twins, each with its fixed twin and
    a ``confirmed KIND`` marker; one sentence each."""
    bugs = [p for p in twins if not p.stem.endswith("_fixed")]
    fixed = {p.stem.removesuffix("_fixed") for p in twins if p.stem.endswith("_fixed")}
    problems = [f"{len(bugs)} bug twins, fewer than {at_least}"] if len(bugs) < at_least else []
    problems += [f"{p.name} has no fixed twin" for p in bugs if p.stem not in fixed]
    problems += [
        f"{p.name} marks no confirmed {kind}"
        for p in bugs
        if not any(m.kind == kind and m.status == "confirmed" for m in parse_markers(p))
    ]
    return problems


def verified_fix_flags(bugs: list[Path], results: dict[Path, list], kind: str) -> dict[str, list[bool]]:
    """For each bug twin whose ``kind`` site the engine confirmed with fixes to offer: each fix's
    ``verified`` after dynamic/verify.py re-checked it (seed 0, as ``confirm_files``)."""
    from grist_lsp.dynamic.options import EngineOptions
    from grist_lsp.dynamic.verify import fix_verdicts

    options = EngineOptions(budget=2.0, seed=0, jobs=1, project_root=str(REPO))
    flags: dict[str, list[bool]] = {}
    for path in bugs:
        for v in fix_verdicts(str(path), path.read_text(), results[path], options):
            if v.site.kind == kind and str(v.status) == "confirmed" and v.fixes:
                flags[path.name] = [f.verified for f in v.fixes]
    return flags


def reproducer_problems(source: Path, workdir: Path, code: str, fix_title: str, fixed_text: str) -> list[str]:
    """A user's round trip on a copy of the bug twin ``source``: ``grist-lsp --check`` confirms a
    ``code`` bug with the verified fix ``fix_title`` and writes its reproducer; the reproducer fails
    in a fresh process; ``--fix`` writes ``fixed_text`` into the program; the reproducer passes.
    What goes wrong, one sentence each."""
    import subprocess
    import sys

    project = workdir / "project"
    project.mkdir()
    program = project / source.name
    program.write_text(source.read_text())
    out = project / "tests"
    check = [sys.executable, "-m", "grist_lsp", "--check", str(program), "--budget", "2"]
    run = subprocess.run([*check, "--write-reproducers", str(out)], capture_output=True, text=True, timeout=600)
    if run.returncode != 1 or f"{code} [confirmed]" not in run.stdout:
        return [f"the check did not confirm {code}: {run.stdout + run.stderr}"]
    problems = [] if f"fix (verified): {fix_title}" in run.stdout else [f"no verified fix {fix_title!r}: {run.stdout}"]
    kind = next(k.name for k in KINDS.values() if k.code == code)
    tests = [f for f in out.glob("test_grist_*.py") if kind in f.name]
    if len(tests) != 1:
        return [*problems, f"expected one {kind} reproducer, found {[t.name for t in tests]}"]
    buggy = pytest_on(tests[0])
    if buggy.returncode != 1 or "1 failed" not in buggy.stdout:
        problems.append(f"the reproducer did not fail on the bug: {buggy.stdout}")
    fixed = subprocess.run([*check, "--fix"], capture_output=True, text=True, timeout=600)
    if fixed_text not in program.read_text():
        return [*problems, f"--fix did not write {fixed_text!r}: {fixed.stdout + fixed.stderr}"]
    after = pytest_on(tests[0])
    if after.returncode != 0 or "1 passed" not in after.stdout:
        problems.append(f"the reproducer still fails after the fix: {after.stdout}")
    return problems


# --- running programs as the tests of the twin folders do -------------------------------------


def confirm_files(paths: list[Path], seed: int = 0, budget: float = 2.0) -> dict[Path, list]:
    """The engine's final verdicts for each file (static pass, then ``confirm``), two files at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from grist_lsp.analyzer.analysis import analyze_file
    from grist_lsp.dynamic.engine import confirm
    from grist_lsp.dynamic.options import EngineOptions

    def run(path: Path) -> tuple[Path, list]:
        options = EngineOptions(budget=budget, seed=seed, jobs=1, project_root=str(REPO))
        return path, confirm(str(path), path.read_text(), analyze_file(str(path)), options)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, paths))


def pytest_on(path: Path) -> Any:
    """``python -m pytest -q path`` in a fresh process, from the file's folder, as a user runs a
    reproducer (the completed process)."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
        capture_output=True,
        text=True,
        cwd=str(path.parent),
        timeout=600,
    )


def engine_problems(path: Path, final: list, strict: bool = False) -> tuple[list[str], list[Match]]:
    """What the engine's final verdicts get wrong against ``path``'s markers, one sentence each,
    and the matches of the ``confirmed`` markers (for checks of their witnesses).

    Wrong: an ``error`` verdict; a ``confirmed`` marker not confirmed, or confirmed by a witness
    that did not replay in a fresh process; any other site confirmed, except a ``possible``
    marker's (a real risk the engine may reach) unless ``strict``.
    """
    problems = [f"{Path(path).name}: error: {v.reason}" for v in final if str(v.status) == "error"]
    confirmed: list[Match] = []
    for m in match_markers(path, final):
        want = m.marker.status if m.marker is not None else None
        status = str(m.verdict.status) if m.verdict is not None else None
        where = f"{Path(path).name}:{m.line} {m.kind}"
        if want == "confirmed":
            if status != "confirmed":
                problems.append(f"{where}: marked confirmed, engine says {status} ({getattr(m.verdict, 'reason', '')})")
            elif not m.verdict.witness.replayed:
                problems.append(f"{where}: confirmed by a witness that did not replay")
            else:
                confirmed.append(m)
        elif status == "confirmed" and (strict or want != "possible"):
            problems.append(f"{where}: marked {want}, engine confirmed it ({m.verdict.reason})")
    return problems, confirmed
