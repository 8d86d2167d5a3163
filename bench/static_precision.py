"""Precision of the static pass on fixed code, and its one hard rule (prints figures).

    python bench/static_precision.py [--verbose] [--json OUT]

The static pass may call a site ``safe`` only when the value ranges prove it,
so on guarded ("fixed") code every site it cannot prove stays ``possible``:
noise a user has to read. This script measures, with the static pass alone
(``analyze_file``, what ``--static-only`` runs), over the whole corpus:

* **fixed twins quiet**: the fixed programs (``*_safe.py``) of the marked
  corpus (``examples/``, ``tests/corpus/programs/``) and of the twin folders
  (``*_fixed.py`` in ``tests/corpus/where``, ``infarith``, ``linalg``, ``spectral``,
  ``precision``) with no ``possible`` site at all;
* **fixed lines quiet**: the sites a person marked as unable to fail
  (``# expect: safe <kind>`` or ``unproven <kind>``, marker format in
  ``tests/corpus/corpus_markers.py``) that the pass proves ``safe``;
* **bug lines called safe**: sites marked ``confirmed``/``possible`` (a real
  bug or risk), and the ``possible`` sites of the static corpus' ``*_bug.py``
  programs, that the pass calls ``safe`` or does not report. This must be 0.

The static corpus' markers (``op@col status``, ``tests/corpus/static/``)
record what the pass says, not a person's judgement (its ``*_safe.py`` files
keep deliberate ``possible`` sites, such as an unbounded ``x.exp()``), so it
only adds a guard: the ``possible`` sites of its ``*_bug.py`` programs must
stay ``possible``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file  # noqa: E402

STATIC = REPO / "tests" / "corpus" / "static"
TWIN_FOLDERS = [
    REPO / "tests" / "corpus" / name for name in ("where", "infarith", "linalg", "spectral", "precision")
]
_STATIC_ITEM = re.compile(r"(?P<op>[\w.]+)@(?P<col>\d+)\s+(?P<status>safe|possible)")


@dataclass
class Figures:
    fixed_files: list[str] = field(default_factory=list)
    fixed_files_quiet: list[str] = field(default_factory=list)
    fixed_sites: int = 0
    fixed_sites_quiet: int = 0
    noisy: list[str] = field(default_factory=list)  # fixed sites still `possible`, with the reason
    bug_sites: int = 0
    bugs_called_safe: list[str] = field(default_factory=list)


def _rel(path: str | Path) -> str:
    return str(Path(path).resolve().relative_to(REPO))


def _twin_files() -> list[Path]:
    """The bug/fixed twins of the kinds with folders of their own (``NAME.py`` / ``NAME_fixed.py``)."""
    return [p for folder in TWIN_FOLDERS if folder.is_dir() for p in sorted(folder.glob("*.py"))]


def _marked(fig: Figures) -> None:
    """Hand-marked programs: examples/, tests/corpus/programs/ and the twin folders."""
    for path in [*cm.program_files(), *_twin_files()]:
        verdicts = analyze_file(str(path))
        statuses = [str(v.status) for v in verdicts if str(v.status) != "error"]
        if path.stem.endswith(("_safe", "_fixed")):
            fig.fixed_files.append(_rel(path))
            if "possible" not in statuses:
                fig.fixed_files_quiet.append(_rel(path))
        for m in cm.match_markers(path, verdicts):
            if m.marker is None:
                continue
            where = f"{_rel(path)}:{m.line} {m.kind}"
            status = str(m.verdict.status) if m.verdict is not None else "no site"
            if m.marker.status in ("safe", "unproven"):
                fig.fixed_sites += 1
                if status in ("safe", "no site"):
                    fig.fixed_sites_quiet += 1
                else:
                    fig.noisy.append(f"{where} [{m.marker.status}]: {m.verdict.reason}")
            else:
                fig.bug_sites += 1
                if status != "possible":
                    fig.bugs_called_safe.append(f"{where} marked {m.marker.status}, static says {status}")


def _static_corpus(fig: Figures) -> None:
    """tests/corpus/static: the `possible` sites of its *_bug.py programs stay possible."""
    for path in sorted(STATIC.glob("*_bug.py")):
        got = {
            (v.site.span.start_line, v.site.span.start_col, v.site.op): str(v.status)
            for v in analyze_file(str(path))
        }
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if "# expect:" not in line:
                continue
            for m in _STATIC_ITEM.finditer(line.split("# expect:", 1)[1]):
                if m["status"] != "possible":
                    continue
                fig.bug_sites += 1
                status = got.get((lineno, int(m["col"]), m["op"]), "no site")
                if status != "possible":
                    fig.bugs_called_safe.append(
                        f"{_rel(path)}:{lineno} {m['op']}@{m['col']} static says {status}"
                    )


def measure() -> Figures:
    fig = Figures()
    _marked(fig)
    _static_corpus(fig)
    return fig


def _share(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--verbose", "-v", action="store_true", help="list the fixed sites still reported possible"
    )
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    fig = measure()
    print(f"fixed twins quiet with --static-only: {_share(len(fig.fixed_files_quiet), len(fig.fixed_files))}")
    for f in fig.fixed_files:
        print(f"  {'quiet ' if f in fig.fixed_files_quiet else 'noisy '} {f}")
    print(
        f"fixed lines quiet (marked safe/unproven, proved safe): {_share(fig.fixed_sites_quiet, fig.fixed_sites)}"
    )
    print(f"bug lines called safe: {len(fig.bugs_called_safe)} of {fig.bug_sites}")
    for b in fig.bugs_called_safe:
        print(f"  {b}")
    if args.verbose:
        print("fixed sites still possible:")
        for n in fig.noisy:
            print(f"  {n}")
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(fig), indent=1))
    return 1 if fig.bugs_called_safe else 0


if __name__ == "__main__":
    sys.exit(main())
