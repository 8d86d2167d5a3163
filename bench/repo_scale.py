"""A whole repository, checked cold, warm, after one edit, static-only and on a local Ray cluster.

Builds (in a temporary folder) a repository of ``--files`` programs copied from the corpus
(``examples/``, ``tests/corpus/programs/``, ``bench/training/``), each made unique (a comment and a
constant with its index) and every ``--import-every``-th one importing one of a few helper modules
of the tree, then runs the real CLI on it (``grist-lsp --check TREE --jobs 2 --format json``) and
prints, in one run:

1. the cold wall time (empty result cache), with each file's own check time (median, p90, max);
2. the warm wall time (nothing changed) beside the ``--static-only`` wall time;
3. after editing one leaf file: the wall time and which files ran again (the cache entries the
   run wrote); after editing a helper module: the same (its importers);
4. the cold wall time with ``--executor ray`` (a local cluster of ``--jobs`` CPUs, no cache) and
   whether its findings equal the local cold run's (times aside);
5. Ray's own overhead per task (trivial tasks on a fresh local cluster) and the cache's size per file.

Usage: ``python bench/repo_scale.py`` (200 files, budget 0.5 s), ``--files 20`` for a quick look,
``--no-ray`` without the extra. Figures depend on the machine's load: the output starts with it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = [REPO / "examples", REPO / "tests" / "corpus" / "programs", REPO / "bench" / "training"]
HELPERS = 4  # helper modules in the tree; programs import them by name (same folder)
HELPER = '''"""A helper module of the generated repository (helper {k})."""


def scaled_{k}(value, factor={k}.0 + 1.0):
    return value * factor
'''
# Runs the CLI in this interpreter with each file's check timed (Service.check_file, the unit of
# work of every executor), the times written as JSON to argv[1]; the rest of argv is the CLI's.
TIMED_CLI = textwrap.dedent(
    """
    import json, sys, time
    from grist_lsp import cli, service

    times = {}
    check_file = service.Service.check_file

    def timed(self, path, *args, **kwargs):
        start = time.monotonic()
        try:
            return check_file(self, path, *args, **kwargs)
        finally:
            times[path] = time.monotonic() - start

    service.Service.check_file = timed
    out, argv = sys.argv[1], sys.argv[2:]
    try:
        code = cli.main(argv)
    finally:
        with open(out, "w") as f:
            json.dump(times, f)
    sys.exit(code)
    """
)


def sources() -> list[Path]:
    return sorted(p for folder in SOURCES for p in folder.glob("*.py") if not p.name.startswith("_"))


def build(tree: Path, files: int, import_every: int) -> dict[str, list[str]]:
    """The repository; returns helper module name -> the programs importing it."""
    tree.mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[project]\nname = "scale-tree"\nversion = "0"\n\n[tool.grist]\n')
    importers: dict[str, list[str]] = {f"helper_{k}": [] for k in range(HELPERS)}
    for k in range(HELPERS):
        (tree / f"helper_{k}.py").write_text(HELPER.format(k=k))
    pool = sources()
    for i in range(files):
        source = pool[i % len(pool)]
        name = f"p{i:04d}_{source.stem}.py"
        text = f"# repo_scale copy {i} of {source.relative_to(REPO)}\n" + source.read_text()
        text += f"\nREPO_SCALE_COPY = {i}\n"
        if import_every and i % import_every == 0:
            helper = f"helper_{(i // import_every) % HELPERS}"
            text += f"import {helper}  # noqa: E402,F401\n"
            importers[helper].append(name)
        (tree / name).write_text(text)
    return importers


def cli(tree: Path, *args: str, times: Path | None = None) -> tuple[float, dict, str]:
    """Run the check; wall seconds, the JSON report, stderr."""
    report = tree.parent / "report.json"
    argv = ["--check", str(tree), "--format", "json", "--output", str(report), *args]
    if times is not None:
        command = [sys.executable, "-c", TIMED_CLI, str(times), *argv]
    else:
        command = [sys.executable, "-m", "grist_lsp", *argv]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree.parent)
    wall = time.monotonic() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(
            f"grist-lsp {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return wall, json.loads(report.read_text()), proc.stderr


def findings(report: dict) -> list[str]:
    """The findings without their times (witness seconds), in one order."""
    out = []
    for finding in report["findings"]:
        finding = dict(finding)
        if isinstance(finding.get("witness"), dict):
            finding["witness"] = {k: v for k, v in finding["witness"].items() if k != "seconds"}
        out.append(json.dumps(finding, sort_keys=True))
    return sorted(out)


def differences(local: dict, remote: dict, limit: int = 10) -> list[str]:
    """What differs between two reports' findings (times aside): each finding only one has, as
    file:line, status and the end of its reason, at most ``limit`` of them."""
    mine, theirs = set(findings(local)), set(findings(remote))
    out = []
    for side, only in (("local only", mine - theirs), ("ray only  ", theirs - mine)):
        for text in sorted(only)[:limit]:
            f = json.loads(text)
            why = (f.get("reason") or f.get("message") or "")[-140:]
            out.append(f"{side}: {Path(f['file']).name}:{f['line']} {f['status']}: ...{why}")
    return out


def rerun(cache: Path, since: float) -> list[str]:
    """The files whose cache entries a run wrote after ``since``: the files it checked again."""
    names = set()
    for entry in cache.rglob("*.json"):
        if entry.stat().st_mtime >= since:
            try:
                names.add(Path(json.loads(entry.read_text())["file"]).name)
            except (ValueError, KeyError):
                continue
    return sorted(names)


def edit(path: Path) -> None:
    path.write_text(path.read_text() + "# edited by repo_scale\n")


def quantiles(values: list[float]) -> str:
    if not values:
        return "no file ran"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"mean {statistics.fmean(ordered):.2f} s, median {statistics.median(ordered):.2f} s, "
        f"p90 {p90:.2f} s, max {ordered[-1]:.2f} s ({len(ordered)} files)"
    )


def ray_overhead(cpus: int, tasks: int = 200) -> str:
    """Seconds per trivial task on a fresh local cluster (after one warm-up round)."""
    import ray

    start = time.monotonic()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    started = time.monotonic() - start

    @ray.remote(num_cpus=1)
    def nothing(i: int) -> int:
        return i

    ray.get([nothing.remote(i) for i in range(cpus * 2)])
    t = time.monotonic()
    ray.get([nothing.remote(i) for i in range(tasks)])
    each = (time.monotonic() - t) / tasks
    t = time.monotonic()
    for i in range(20):
        ray.get(nothing.remote(i))
    one_by_one = (time.monotonic() - t) / 20
    ray.shutdown()
    return (
        f"cluster start {started:.1f} s; {each * 1000:.1f} ms a task submitted together ({tasks} tasks), "
        f"{one_by_one * 1000:.1f} ms a task round trip one at a time"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200, help="programs in the tree (default 200)")
    parser.add_argument("--budget", type=float, default=0.5, help="search budget per site (default 0.5 s)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--import-every", type=int, default=10, help="every Nth program imports a helper")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree")
    args = parser.parse_args()

    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min) on {os.cpu_count()} cores")
    print(f"budget {args.budget:g} s a site (small on purpose: {args.files} files), --jobs {args.jobs}")
    work = Path(tempfile.mkdtemp(prefix="grist-scale-"))
    tree = work / "tree"
    try:
        importers = build(tree, args.files, args.import_every)
        print(f"tree: {args.files} programs + {HELPERS} helpers at {tree}")
        cache = work / "cache"
        common = ["--jobs", str(args.jobs), "--budget", str(args.budget)]
        cached = [*common, "--cache-dir", str(cache)]

        wall, cold, _ = cli(tree, *cached, times=work / "times.json")
        per_file = list(json.loads((work / "times.json").read_text()).values())
        stats = cold["stats"]
        print(
            f"cold   --jobs {args.jobs}: {wall:7.1f} s  ({stats['confirmed']} confirmed, "
            f"{stats['possible']} possible, {stats['error']} errors)"
        )
        print(f"       per file (its check_file): {quantiles(per_file)}")

        static_wall, _, _ = cli(tree, "--static-only", *common)
        since = time.time()
        warm_wall, warm, _ = cli(tree, *cached)
        print(
            f"warm   nothing changed: {warm_wall:7.1f} s  ({warm['stats'].get('cached', 0)} files from the cache)"
        )
        print(
            f"static --static-only:   {static_wall:7.1f} s  (warm - static = {warm_wall - static_wall:+.2f} s)"
        )
        print(f"       files run again when nothing changed: {rerun(cache, since) or 'none'}")
        print(f"       warm findings equal cold: {findings(warm) == findings(cold)}")

        imported = {name for names in importers.values() for name in names}
        runnable = {
            Path(f["file"]).name for f in cold["findings"] if f["status"] in ("confirmed", "possible")
        }
        leaf = next(p for p in sorted(tree.glob("p*.py")) if p.name not in imported and p.name in runnable)
        edit(leaf)
        since = time.time()
        edit_wall, _, _ = cli(tree, *cached)
        print(f"edit   one leaf ({leaf.name}): {edit_wall:7.1f} s; ran again: {rerun(cache, since)}")

        helper = next(h for h, names in importers.items() if names)
        edit(tree / f"{helper}.py")
        since = time.time()
        edit_wall, _, _ = cli(tree, *cached)
        again = rerun(cache, since)
        expected = sorted(n for n in importers[helper] if n in runnable)
        print(
            f"edit   helper {helper}.py (imported by {len(importers[helper])}): {edit_wall:7.1f} s; ran again: {again}"
        )
        print(f"       = its importers with open sites: {again == expected}")

        sizes = [e.stat().st_size for e in cache.rglob("*.json")]
        if sizes:
            print(
                f"cache  {len(sizes)} entries, {sum(sizes) / 1024:.0f} KiB: {statistics.median(sizes) / 1024:.1f} KiB "
                f"median, {max(sizes) / 1024:.1f} KiB max per file"
            )

        if not args.no_ray:
            # The leaf and helper edits changed those files' findings' text only by the appended
            # comment, after every finding: the cold local report still describes the tree.
            ray_wall, on_ray, _ = cli(tree, *common, "--no-cache", "--executor", "ray")
            print(
                f"ray    cold, local {args.jobs}-CPU cluster: {ray_wall:7.1f} s  "
                f"({(ray_wall / wall - 1) * 100:+.0f}% vs --jobs {args.jobs} cold)"
            )
            print(f"       findings equal the local cold run's: {findings(on_ray) == findings(cold)}")
            for line in differences(cold, on_ray):
                print(f"       {line}")
            print(f"       Ray per task: {ray_overhead(args.jobs)}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
