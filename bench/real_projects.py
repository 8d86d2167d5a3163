"""Precision of the static pass on real-project-style programs, and the dynamic check of them as one project.

    python bench/real_projects.py [ROOT] [--list] [--dynamic] [--jobs N]

ROOT defaults to bench/real_projects/: training scripts with argparse, GPT-style attention
with causal masks, RMSNorm/LayerNorm, position encodings, RL reward normalisation, a VAE,
samplers, GNN normalisation, data utilities. Each site is labelled on its line with the
``# expect:`` markers of tests/corpus/corpus_markers.py: ``possible``/``confirmed`` for a
real risk (some input a program can meet makes NaN/INF), ``safe`` for one the static
pass should prove, ``unproven`` for one that cannot fail for reasons beyond range facts.

Static figures (counts: they do not depend on the machine): files, lines, ``possible``
per 1,000 lines, precision of ``possible`` (possible sites labelled real / all possible
sites; an unlabelled possible site counts as not real, and ``--list`` prints it), and the
real ones missed (labelled real, not reported ``possible``). Goals: precision >= 0.6 and
no real one missed.

``--dynamic`` also runs ``grist-lsp --check ROOT --format json`` in a subprocess and prints
its wall time (noisy on a shared machine), the confirmed findings, the error findings by
kind (the finding's ``error_kind`` when present, else ``other``) and whether the check
itself crashed (exit status 2 or a traceback on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))

from corpus_markers import parse_markers  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file  # noqa: E402
from grist_lsp.model import Status  # noqa: E402

REAL = ("possible", "confirmed")
ROOT = REPO / "bench" / "real_projects"


@dataclass
class Tally:
    files: int = 0
    lines: int = 0
    possible: int = 0
    safe: int = 0
    true_positives: int = 0
    real: int = 0
    seconds: float = 0.0
    missed: list[str] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)


def tally_file(path: Path, t: Tally) -> None:
    """Adds one file's sites to ``t``: reported possible sites against its labels, by (line, kind)."""
    t.files += 1
    t.lines += len(path.read_text(encoding="utf-8").splitlines())
    start = time.perf_counter()
    verdicts = analyze_file(str(path))
    t.seconds += time.perf_counter() - start
    reported: Counter[tuple[int, str]] = Counter()
    reasons: dict[tuple[int, str], str] = {}
    for v in verdicts:
        if v.status is Status.POSSIBLE:
            reported[(v.site.span.start_line, v.site.kind)] += 1
            reasons[(v.site.span.start_line, v.site.kind)] = v.message
        elif v.status is Status.SAFE:
            t.safe += 1
    real: Counter[tuple[int, str]] = Counter(
        (m.line, m.kind) for m in parse_markers(path) if m.status in REAL
    )
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for key in reported.keys() | real.keys():
        hit = min(reported[key], real[key])
        t.possible += reported[key]
        t.real += real[key]
        t.true_positives += hit
        line, kind = key
        t.missed += [f"{rel}:{line} {kind}"] * (real[key] - hit)
        t.false_alarms += [f"{rel}:{line} {kind}: {reasons.get(key, '')}"] * (reported[key] - hit)


def static_report(root: Path, show: bool) -> Tally:
    t = Tally()
    for path in sorted(root.rglob("*.py")):
        tally_file(path, t)
    precision = t.true_positives / t.possible if t.possible else 1.0
    print(f"static pass on {root}:")
    print(f"  files {t.files}, lines {t.lines:,}, sites possible {t.possible}, safe {t.safe}")
    print(f"  possible per 1,000 lines: {1000 * t.possible / max(t.lines, 1):.1f}")
    print(
        f"  precision of possible (real / all): {t.true_positives}/{t.possible} = {precision:.2f}  (goal >= 0.6)"
    )
    print(f"  real ones missed: {len(t.missed)} of {t.real}  (goal 0)")
    print(f"  static time: {1000 * t.seconds / max(t.files, 1):.1f} ms per file (wall, noisy)")
    if show or t.missed:
        for m in t.missed:
            print(f"    missed: {m}")
    if show:
        for f in t.false_alarms:
            print(f"    possible, not real: {f}")
    return t


def dynamic_report(root: Path, jobs: int | None) -> None:
    cmd = [sys.executable, "-m", "grist_lsp", "--check", str(root), "--format", "json", "--no-cache"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(root))
    wall = time.perf_counter() - start
    crashed = proc.returncode == 2 or "Traceback (most recent call last)" in proc.stderr
    try:
        findings = json.loads(proc.stdout).get("findings", [])
    except json.JSONDecodeError:
        findings, crashed = [], True
    statuses = Counter(f.get("status") for f in findings)
    errors = Counter(f.get("error_kind") or "other" for f in findings if f.get("status") == "error")
    print(f"dynamic check `grist-lsp --check {root} --format json`:")
    print(f"  wall time {wall:.1f} s (noisy: the machine is shared), exit status {proc.returncode}")
    print(f"  findings: {dict(sorted(statuses.items()))}")
    print(f"  confirmed: {statuses.get('confirmed', 0)}")
    print(f"  errors by kind: {dict(sorted(errors.items())) or 'none'}")
    for f in findings:
        if f.get("status") == "error":
            where = (
                Path(f.get("file", "?")).relative_to(root)
                if f.get("file", "").startswith(str(root))
                else f.get("file")
            )
            print(
                f"    error ({f.get('error_kind') or 'other'}): {where}: {f.get('message', '').splitlines()[0][:110]}"
            )
    print(f"  crashes of the check: {1 if crashed else 0}")
    if crashed:
        print("  stderr (last lines):")
        for line in proc.stderr.strip().splitlines()[-15:]:
            print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=ROOT)
    parser.add_argument(
        "--list", action="store_true", help="print every missed and every not-real possible site"
    )
    parser.add_argument(
        "--dynamic", action="store_true", help="also run the whole check on ROOT as one project"
    )
    parser.add_argument("--jobs", type=int, default=None, help="--jobs for the dynamic check")
    args = parser.parse_args()
    root = args.root.resolve()
    static_report(root, args.list)
    if args.dynamic:
        dynamic_report(root, args.jobs)


if __name__ == "__main__":
    main()
