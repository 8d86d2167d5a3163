"""Precision of the static pass on real-project-style programs, and the dynamic check of them as one project.

    python bench/real_projects.py [ROOT] [--list] [--dynamic] [--jobs N]
    python bench/real_projects.py --public [--mirrors DIR] [--list] [--project NAME]

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

``--public`` measures the same figures on public PyTorch projects instead: each project of
``bench/public_projects.json`` is read from its git mirror (``--mirrors``, default
``$GRIST_MIRRORS`` or ``../.mirror`` beside the checkout: the ``fetch`` tool's
``owner+name/repo``) at its pinned commit, only the ``.py`` blobs present (large files are
absent from a mirror), into a temporary folder; nothing of theirs is kept. Sites are matched to
the manifest's labels by file, line, column and kind; a ``possible`` site with no label counts as
noise and ``--list`` names it. A project whose mirror is absent is skipped, and said so. Goals:
precision >= 0.8 in total and on the examples collection, at most 2 noise warnings on each GPT
implementation, no real one lost, at most 3 ``possible`` per 1,000 lines in total.

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
MANIFEST = REPO / "bench" / "public_projects.json"
GPT_PROJECTS = ("karpathy+minGPT", "karpathy+nanoGPT")
EXAMPLES_PROJECT = "pytorch+examples"


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


@dataclass
class Public:
    """One public project's figures against its labels."""

    name: str
    files: int = 0
    lines: int = 0
    possible: int = 0
    real: int = 0
    noise: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.real / self.possible if self.possible else 1.0

    @property
    def per_kloc(self) -> float:
        return 1000 * self.possible / max(self.lines, 1)


def _git_dir(mirrors: Path, name: str) -> Path | None:
    for candidate in (mirrors / name / "repo" / ".git", mirrors / name / "repo"):
        if (candidate / "HEAD").exists():
            return candidate
    return None


def export_python(git_dir: Path, commit: str, dest: Path) -> None:
    """Writes the ``.py`` blobs of ``commit`` that the mirror holds under ``dest``."""
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wanted = []
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        if path.endswith(".py") and meta.split(" ")[1:2] == ["blob"]:
            wanted.append((meta.split(" ")[2], path))
    for sha, path in wanted:
        blob = subprocess.run(
            ["git", "--git-dir", str(git_dir), "cat-file", "blob", sha], capture_output=True
        )
        if blob.returncode == 0:  # a blob the mirror lacks is skipped, as a plain clone would stop there
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)


def measure_public(project: dict, git_dir: Path) -> Public:
    import tempfile

    labels = {(lab["file"], lab["line"], lab["column"], lab["kind"]): lab for lab in project["labels"]}
    got = Public(project["name"])
    with tempfile.TemporaryDirectory(prefix="grist-public-") as tmp:
        root = Path(tmp)
        export_python(git_dir, project["commit"], root)
        seen: set[tuple[str, int, int, str]] = set()
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            got.files += 1
            got.lines += len(path.read_text(encoding="utf-8", errors="replace").splitlines())
            for v in analyze_file(str(path)):
                if v.status not in (Status.POSSIBLE, Status.CONFIRMED):
                    continue
                key = (rel, v.site.span.start_line, v.site.span.start_col + 1, v.site.kind)
                seen.add(key)
                got.possible += 1
                label = labels.get(key)
                if label is not None and label["label"] == "real":
                    got.real += 1
                else:
                    why = label["why"] if label else "UNLABELLED"
                    got.noise.append(f"{rel}:{key[1]}:{key[2]} {key[3]}: {why}")
    got.lost = [
        f"{k[0]}:{k[1]}:{k[2]} {k[3]}: {lab['why']}"
        for k, lab in labels.items()
        if lab["label"] == "real" and k not in seen
    ]
    return got


def public_report(mirrors: Path, show: bool, only: str | None) -> list[Public]:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    results: list[Public] = []
    print(f"static pass on public projects ({MANIFEST.relative_to(REPO)}, mirrors in {mirrors}):")
    print(
        f"  {'project':40s} {'files':>5s} {'lines':>7s} {'possible':>8s} {'/kloc':>6s} {'precision':>9s} {'lost':>4s}"
    )
    for project in manifest["projects"]:
        if only is not None and project["name"] != only:
            continue
        git_dir = _git_dir(mirrors, project["name"])
        if git_dir is None:
            print(f"  {project['name']:40s} skipped: no mirror (fetch github:{project['repo']})")
            continue
        r = measure_public(project, git_dir)
        results.append(r)
        print(
            f"  {r.name:40s} {r.files:5d} {r.lines:7,d} {r.possible:8d} {r.per_kloc:6.1f} "
            f"{r.real:4d}/{r.possible:<4d}={r.precision:4.2f} {len(r.lost):4d}"
        )
        for line in r.lost:
            print(f"      lost (labelled real, not reported): {line}")
        if show:
            for line in r.noise:
                print(f"      possible, not real: {line}")
    total = Public(
        "total",
        sum(r.files for r in results),
        sum(r.lines for r in results),
        sum(r.possible for r in results),
        sum(r.real for r in results),
    )
    total.lost = [x for r in results for x in r.lost]
    print(
        f"  {'total':40s} {total.files:5d} {total.lines:7,d} {total.possible:8d} {total.per_kloc:6.1f} "
        f"{total.real:4d}/{total.possible:<4d}={total.precision:4.2f} {len(total.lost):4d}"
    )
    by_name = {r.name: r for r in results}
    examples = by_name.get(EXAMPLES_PROJECT)
    print("  goals:")
    print(f"    precision in total >= 0.8: {total.precision:.2f}")
    if examples is not None:
        print(f"    precision on {EXAMPLES_PROJECT} >= 0.8: {examples.precision:.2f}")
    for name in GPT_PROJECTS:
        if name in by_name:
            print(f"    noise warnings on {name} <= 2: {len(by_name[name].noise)}")
    print(f"    real ones lost == 0: {len(total.lost)}")
    print(f"    possible per 1,000 lines <= 3: {total.per_kloc:.1f}")
    return results


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
    parser.add_argument("--public", action="store_true", help="measure the public projects of the manifest")
    parser.add_argument(
        "--mirrors",
        type=Path,
        default=Path(os.environ.get("GRIST_MIRRORS", REPO.parent / ".mirror")),
        help="folder of the git mirrors (owner+name/repo), for --public",
    )
    parser.add_argument("--project", default=None, help="with --public: only this project (owner+name)")
    args = parser.parse_args()
    if args.public:
        public_report(args.mirrors.resolve(), args.list, args.project)
        return
    root = args.root.resolve()
    static_report(root, args.list)
    if args.dynamic:
        dynamic_report(root, args.jobs)


if __name__ == "__main__":
    main()
