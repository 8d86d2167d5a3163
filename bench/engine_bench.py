"""Benchmark the GRIST engine on the marked programs (examples/ and tests/corpus/programs/).

    python bench/engine_bench.py                      # seed 0, budget 2 s per site, headline on
    python bench/engine_bench.py --seeds 3 --budget 2 # stability over seeds 0, 1, 2
    python bench/engine_bench.py --seeds 5 --first-seed 5  # seeds 5..9 (a long run in slices)
    python bench/engine_bench.py --no-headline tests/corpus/programs/dice_loss.py

Per site: file:line, kind, the marker (what a person checked by hand), the static
status, the final status after ``confirm``, the entry that exposed it, the
search iterations and the seconds to expose it (the witness's own clock).
Totals: final confirmed/possible/safe counts, median and p90 seconds to expose,
misses (marked confirmed, not confirmed), false positives (confirmed where the
marker says safe or unproven), and `possible` markers the engine did confirm.
With --seeds N every file is checked with seeds 0..N-1 and stability is
reported: every bug confirmed and zero false positives, per seed.

Headline (GRIST's measure): for the scripts whose own training loop reaches NaN
(tests/corpus/programs/training_*.py), the time the unmodified program takes to
hit NaN on its own against the time the engine takes to expose the same op.
"On its own" is measured by running ``python script.py`` in a subprocess with a
time limit and timestamping the line where the script reports its non-finite
loss (each prints "non-finite loss ... at step N" and stops); the wall clock
starts at process launch, so it includes interpreter and torch start-up. Which
op produced the first NaN/INF is found in a second, separate run under the
corpus oracle (finite operands, non-finite output; tests/corpus/corpus_markers.py).
The engine side is that site's witness seconds, and also the wall clock of the
whole ``confirm`` call for the file (worker start-up, every site, replay).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file  # noqa: E402
from grist_lsp.dynamic.engine import confirm  # noqa: E402
from grist_lsp.dynamic.options import EngineOptions  # noqa: E402
from grist_lsp.model import Status  # noqa: E402


@dataclass
class Row:
    file: str
    line: int
    kind: str
    marker: str | None
    static: str | None
    final: str | None
    entry: str = ""
    iterations: int | None = None
    seconds: float | None = None
    result: str = ""
    weights_moved: float | None = None
    beyond: float | None = None  # the witness's inputs, x times the range the program used
    reason: str = ""  # the engine's account of a site it left open


@dataclass
class FileRun:
    path: str
    seed: int
    wall: float
    rows: list[Row] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def rel(path: str | Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def entries_for(path: Path) -> list[str]:
    """The explicit entry a user would pass with --entry: the file's grist_entry(), if it has one."""
    return [f"{path}:grist_entry"] if "\ndef grist_entry(" in path.read_text() else []


def options_for(path: Path, seed: int, budget: float, jobs: int = 1) -> EngineOptions:
    """What a user checking ``path`` from the repository root would pass."""
    return EngineOptions(
        budget=budget, seed=seed, jobs=jobs, project_root=str(REPO), entries=entries_for(path)
    )


def run_file(path: Path, seed: int, budget: float, jobs: int) -> FileRun:
    static = analyze_file(str(path))
    options = options_for(path, seed, budget, jobs)
    t0 = time.monotonic()
    final = confirm(str(path), path.read_text(), static, options)
    wall = time.monotonic() - t0
    run = FileRun(rel(path), seed, wall)
    run.errors = [v.reason for v in final if str(v.status) == "error"]
    static_by_key = {v.site.key: str(v.status) for v in static if v.site.op}
    for m in cm.match_markers(path, final):
        v = m.verdict
        row = Row(
            rel(path),
            m.line,
            m.kind,
            m.marker.status if m.marker else None,
            static_by_key.get(v.site.key) if v is not None else None,
            str(v.status) if v is not None else None,
        )
        if v is not None and v.witness is None:
            row.reason = v.reason
        if v is not None and v.witness is not None:
            w = v.witness
            row.entry, row.iterations, row.seconds, row.result = w.entry, w.iterations, w.seconds, w.result
            row.weights_moved = max(w.weights_moved.values(), default=0.0)
            row.beyond = w.beyond_examples
        run.rows.append(row)
    return run


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[k]


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def summarise(runs: list[FileRun]) -> dict:
    rows = [r for run in runs for r in run.rows]
    finals = [r.final for r in rows if r.final is not None]
    exposed = [r.seconds for r in rows if r.final == "confirmed" and r.seconds is not None]
    return {
        "sites": len(finals),
        "confirmed": finals.count("confirmed"),
        "possible": finals.count("possible"),
        "safe": finals.count("safe"),
        "marked_confirmed": sum(r.marker == "confirmed" for r in rows),
        "misses": [
            f"{r.file}:{r.line} {r.kind}" for r in rows if r.marker == "confirmed" and r.final != "confirmed"
        ],
        "miss_reasons": {
            f"{r.file}:{r.line} {r.kind}": r.reason
            for r in rows
            if r.marker == "confirmed" and r.final != "confirmed"
        },
        "false_positives": [
            f"{r.file}:{r.line} {r.kind}"
            for r in rows
            if r.marker in ("safe", "unproven", None) and r.final == "confirmed"
        ],
        "possible_confirmed": [
            f"{r.file}:{r.line} {r.kind}" for r in rows if r.marker == "possible" and r.final == "confirmed"
        ],
        # A witness whose inputs stay in the range the program used (its weights may have moved):
        # the one a maintainer believes (issue 37, item 6).
        "in_range": sum(r.final == "confirmed" and (r.beyond is None or r.beyond <= 1) for r in rows),
        "out_of_range": [
            f"{r.file}:{r.line} {r.kind} ({r.beyond:.3g}x)"
            for r in rows
            if r.final == "confirmed" and r.beyond is not None and r.beyond > 1
        ],
        "median_seconds": statistics.median(exposed) if exposed else None,
        "p90_seconds": pct(exposed, 0.9),
        "wall_seconds": sum(run.wall for run in runs),
        "errors": [f"{run.path}: {e}" for run in runs for e in run.errors],
    }


def print_rows(runs: list[FileRun]) -> None:
    print(
        f"{'site':44s} {'kind':6s} {'marker':9s} {'static':8s} {'final':9s} {'iters':>6s} {'secs':>6s} "
        f"{'inputs':>7s}  entry"
    )
    for run in runs:
        for r in run.rows:
            if r.final is None and r.marker == "safe":
                continue  # a safe marker on an expression the static pass does not even list
            print(
                f"{r.file + ':' + str(r.line):44s} {r.kind:6s} {r.marker or '-':9s} {r.static or '-':8s} "
                f"{r.final or '-':9s} {r.iterations if r.iterations is not None else '-':>6} "
                f"{fmt(r.seconds):>6s} {_inputs(r):>7s}  {r.entry}"
            )


def _inputs(r: Row) -> str:
    """A confirmation's inputs: "in" the range the program used, or how many times past it."""
    if r.final != "confirmed":
        return "-"
    return "in" if r.beyond is None or r.beyond <= 1 else f"{r.beyond:.2g}x"


def print_summary(s: dict, title: str) -> None:
    print(f"\n== {title}")
    print(f"sites {s['sites']}: confirmed {s['confirmed']}, possible {s['possible']}, safe {s['safe']}")
    print(
        f"marked confirmed {s['marked_confirmed']}, engine confirmed {s['marked_confirmed'] - len(s['misses'])}; "
        f"misses {len(s['misses'])}, false positives {len(s['false_positives'])}, "
        f"possible markers confirmed {len(s['possible_confirmed'])}"
    )
    print(
        f"seconds to expose: median {fmt(s['median_seconds'])}, p90 {fmt(s['p90_seconds'])}; "
        f"engine wall clock over all files {fmt(s['wall_seconds'], 1)} s"
    )
    if s["confirmed"]:
        print(
            f"confirmations with inputs within the range the program used: {s['in_range']}/{s['confirmed']}"
            f" = {s['in_range'] / s['confirmed']:.2f} (goal >= 0.90)"
        )
    for label, word in (
        ("out_of_range", "inputs out of range"),
        ("misses", "miss"),
        ("false_positives", "false positive"),
        ("possible_confirmed", "possible marker confirmed"),
        ("errors", "error"),
    ):
        for item in s[label]:
            why = s["miss_reasons"].get(item, "") if label == "misses" else ""
            print(f"  {word}: {item}" + (f"\n      engine: {why}" if why else ""))


# --- headline: time to NaN on its own vs time to expose ---------------------------

NATURAL_NAN_LIMIT = 600.0


def _one_thread_env() -> dict[str, str]:
    # The engine's workers run torch on one thread; the program on its own gets the same
    # conditions (on a shared, loaded machine one thread is also the faster setting).
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def exit_on_sigterm() -> None:
    """A bench stopped with ``kill`` unwinds like Ctrl-C: the ``finally`` that kills a program's
    own run (an endless loop that never fails by itself) runs, instead of leaving it on a core."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def time_to_nan_on_its_own(path: Path, limit: float, cwd: Path = REPO) -> tuple[float | None, str]:
    """Wall seconds from launch until the script prints its non-finite loss line (None: never, within limit).

    A script that prints nothing while it loops is stopped by a timer at ``limit``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-u", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env=_one_thread_env(),
    )
    timer = threading.Timer(limit, proc.kill)
    timer.start()
    found, line = None, ""
    assert proc.stdout is not None, "the script's stdout is a pipe (Popen stdout=PIPE)"
    try:
        for line in proc.stdout:
            if "non-finite loss" in line:
                found = time.monotonic() - t0
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    return found, line.strip()


def first_nan_op(path: Path, limit: float) -> tuple[int, str, str, str] | None:
    """(line, kind, op, result) of the first NaN/INF the unmodified script produces, via the corpus oracle."""
    corpus = str(REPO / "tests" / "corpus")
    code = (
        f"import json, sys; sys.path.insert(0, {corpus!r}); import corpus_markers as cm; "
        f"print('FIRST', json.dumps(cm.first_nonfinite({str(path)!r})))"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=limit,
            cwd=REPO,
            env=_one_thread_env(),
        )
    except subprocess.TimeoutExpired:
        return None
    for line in out.stdout.splitlines():
        if line.startswith("FIRST "):
            got = json.loads(line[6:])
            return tuple(got) if got else None
    return None


def start_up_seconds(repeat: int = 3) -> float:
    """Median wall seconds for a fresh interpreter to import torch and the engine's worker:
    what the program on its own and every engine worker pay before any work."""
    times = []
    for _ in range(repeat):
        t0 = time.monotonic()
        subprocess.run(
            [sys.executable, "-c", "import torch, grist_lsp.dynamic.worker"],
            check=True,
            cwd=REPO,
            env=_one_thread_env(),
        )
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def targeted_wall(path: Path, line: int, kind: str, budget: float) -> tuple[float, str | None]:
    """GRIST's own setting: the op is named and only it is searched. Wall seconds of one
    ``confirm`` call for that site alone (worker start-up, the script's recording run,
    the search, shrinking, the replay in a fresh process), and the final status."""
    static = analyze_file(str(path))
    keep = [v for v in static if v.site.op and v.site.span.start_line == line and v.site.kind == kind]
    if not keep:
        return float("nan"), None
    only = [
        v if v is keep[0] or str(v.status) != "possible" else dataclasses.replace(v, status=Status.SAFE)
        for v in static
    ]
    options = options_for(path, 0, budget)
    t0 = time.monotonic()
    final = confirm(str(path), path.read_text(), only, options)
    wall = time.monotonic() - t0
    status = next((str(v.status) for v in final if v.site.key == keep[0].site.key), None)
    return wall, status


def headline(runs: list[FileRun], scripts: list[Path], limit: float, budget: float) -> list[dict]:
    out = []
    by_path = {run.path: run for run in runs if run.seed == 0}
    start = start_up_seconds()
    for script in scripts:
        natural, said = time_to_nan_on_its_own(script, limit)
        first = first_nan_op(script, limit)
        run = by_path.get(rel(script))
        step = re.search(r"at step (\d+)", said)
        entry = {
            "script": rel(script),
            "natural_seconds": natural,
            "natural_report": said,
            "natural_steps": int(step.group(1)) if step and natural else None,
            "first_op": first,
            "engine_seconds": None,
            "engine_file_wall": run.wall if run else None,
            "engine_status": None,
            "engine_iterations": None,
            "start_up_seconds": start,
            "targeted_wall": None,
            "targeted_status": None,
        }
        if first and run:
            for r in run.rows:
                if r.line == first[0] and r.kind == first[1]:
                    entry["engine_seconds"], entry["engine_status"] = r.seconds, r.final
                    entry["engine_iterations"] = r.iterations
        if first:
            entry["targeted_wall"], entry["targeted_status"] = targeted_wall(
                script, first[0], first[1], budget
            )
        out.append(entry)
    print(
        "\n== headline: time for the program to hit NaN on its own vs time for the engine to expose that op"
    )
    print(f"start-up (a fresh interpreter importing torch and the worker), paid by both sides: {start:.2f} s")
    print(
        f"{'script':46s} {'first NaN op':13s} {'own steps':>9s} {'own (s)':>8s} {'site (s)':>9s} "
        f"{'iters':>6s} {'op alone (s)':>12s} {'file (s)':>9s} {'site':>6s} {'op alone':>8s} {'file':>5s}"
    )
    for e in out:
        op = f"{e['first_op'][0]} {e['first_op'][1]}" if e["first_op"] else "-"
        nat, eng, wall, alone = (
            e["natural_seconds"],
            e["engine_seconds"],
            e["engine_file_wall"],
            e["targeted_wall"],
        )
        r1 = f"{nat / eng:.0f}x" if nat and eng else "-"
        # Start-up taken off both sides: the program's own run and the engine's worker pay it alike.
        r3 = f"{(nat - start) / (alone - start):.1f}x" if nat and alone and alone > start else "-"
        r2 = f"{nat / wall:.1f}x" if nat and wall else "-"
        steps = e["natural_steps"] if e["natural_steps"] is not None else "-"
        print(
            f"{e['script']:46s} {op:13s} {steps:>9} {fmt(nat, 1):>8s} {fmt(eng):>9s} "
            f"{e['engine_iterations'] if e['engine_iterations'] is not None else '-':>6} {fmt(alone, 1):>12s} "
            f"{fmt(wall, 1):>9s} {r1:>6s} {r3:>8s} {r2:>5s}   ({e['engine_status']}, alone: {e['targeted_status']})"
        )
    print(
        "ratios: site = own time / the witness's search seconds; op alone = (own - start-up) / "
        "(one confirm call for that op alone - start-up); file = own time / confirm of every site of the file"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    exit_on_sigterm()
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="program files (default: every marked program)")
    ap.add_argument("--seeds", type=int, default=1, help="repeat with seeds 0..N-1 and report stability")
    ap.add_argument(
        "--first-seed", type=int, default=0, help="start at this seed (run a long --seeds in slices)"
    )
    ap.add_argument("--budget", type=float, default=2.0, help="engine search seconds per site")
    ap.add_argument("--jobs", type=int, default=1, help="engine workers per file")
    ap.add_argument("--parallel", type=int, default=2, help="files checked at once")
    ap.add_argument("--no-headline", action="store_true", help="skip the time-to-NaN-on-its-own comparison")
    ap.add_argument(
        "--nan-limit", type=float, default=NATURAL_NAN_LIMIT, help="seconds a script may run on its own"
    )
    ap.add_argument("--json", help="write every row and summary here")
    args = ap.parse_args(argv)

    files = [Path(p).resolve() for p in args.paths] or cm.program_files()
    all_runs: list[FileRun] = []
    per_seed = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            runs = list(pool.map(lambda f: run_file(f, seed, args.budget, args.jobs), files))
        all_runs += runs
        print(f"\n##### seed {seed} (budget {args.budget} s per site)")
        print_rows(runs)
        per_seed[seed] = summarise(runs)
        print_summary(per_seed[seed], f"seed {seed}")

    if args.seeds > 1:
        print("\n== stability over seeds")
        for seed, s in per_seed.items():
            ok = not s["misses"] and not s["false_positives"]
            print(
                f"seed {seed}: {'every bug confirmed, no false positive' if ok else 'NOT stable'} "
                f"(misses {len(s['misses'])}, false positives {len(s['false_positives'])}, "
                f"median {fmt(s['median_seconds'])} s, p90 {fmt(s['p90_seconds'])} s)"
            )
        always_missed = set.intersection(*(set(s["misses"]) for s in per_seed.values()))
        sometimes = set.union(*(set(s["misses"]) for s in per_seed.values())) - always_missed
        print(f"missed on every seed: {len(always_missed)}; missed on some seeds only: {sorted(sometimes)}")

    heads = []
    if not args.no_headline:
        scripts = [f for f in files if f.name.startswith("training_")]
        if scripts:
            heads = headline(all_runs, scripts, args.nan_limit, args.budget)

    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "budget": args.budget,
                    "seeds": args.seeds,
                    "runs": [
                        {
                            "path": r.path,
                            "seed": r.seed,
                            "wall": r.wall,
                            "errors": r.errors,
                            "rows": [vars(x) for x in r.rows],
                        }
                        for r in all_runs
                    ],
                    "summary": per_seed,
                    "headline": heads,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
