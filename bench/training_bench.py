"""GRIST's headline on training programs: whole-file check time against the program's own time to NaN.

    python bench/training_bench.py                  # every bench/training/*.py, seed 0, own runs capped at 120 s
    python bench/training_bench.py --seeds 10       # stability: confirmed at the labelled lines on seeds 0..9
    python bench/training_bench.py --cap 60 bench/training/logreg_variable_while.py

Per program, in a scratch copy of it (programs write result files); a folder of
``bench/training/`` is a project (a package and its tests), copied whole and checked as
``grist-lsp --check .`` from its root, its labels read from every file in it:

* **own**: ``python prog.py`` on one thread (as the engine's workers run), wall clock from
  launch until it prints its ``non-finite loss ... at step N`` line, capped at ``--cap``
  (a project has no own run);
* **check**: the wall clock of ``grist-lsp --check prog.py --format json --seed S``, everything
  a user waits for: interpreter and torch start-up, the static pass, every site, the replay of
  each witness in a fresh process and the re-check of every fix;
* **floor**: the same machine's ``python -c "import torch"`` on one thread as above, run by the
  bench right before each program's checks (on a shared machine the load moves between
  programs), and **check - floor** (seed 0's check against its own program's floor);
* **peak MiB**: the check's peak memory over all its processes: the sum of the resident set
  sizes of the ``grist-lsp`` process and all its descendants (workers, the verify child, the
  sandbox's processes), sampled from ``/proc`` every 50 ms while it runs (seed 0), and **PSS
  MiB**, the sum of their proportional set sizes (``smaps_rollup``): a page shared by several
  processes (a forked child's copy of its fork server's torch) divided among them, the memory the
  check really holds;
* **torch**: how many of the check's processes imported torch (seed 0): those started as
  ``python -m grist_lsp.dynamic...``, not the children forked from a fork server (sampled too);
* **labelled**: the lines marked ``# expect: confirmed <kind>`` that the check confirmed, per seed;
* **ratio**: own / check (seed 0), for the programs that reach NaN by themselves within the cap;
* **in range**: seed 0's confirmations whose witness keeps every input within the range the
  program gave it (``beyond_examples`` <= 1; a witness of weights alone counts as within), of all.

Medians are printed last: check, floor, check - floor over all programs, and the ratio over
those that fail by themselves; then the goals of issue 23 (median check - floor under 1.0 s, no
program more than 3 s beyond the floor, peak memory under 1 GiB on every program). Runs are
sequential so that the two sides see the same machine.

grist-lsp's modules are compiled to bytecode first, as ``pip install`` does for a user's install
(torch's always are): an editable install run with ``PYTHONDONTWRITEBYTECODE`` set (as CI and
some machines set it) would otherwise recompile them in every process, 0.3-0.5 s a check that no
user pays.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
sys.path.insert(0, str(REPO / "bench"))

import corpus_markers as cm  # noqa: E402
from engine_bench import _one_thread_env, exit_on_sigterm, time_to_nan_on_its_own  # noqa: E402

PROGRAMS = REPO / "bench" / "training"
_STEP = re.compile(r"at step (\d+)")


GIB = 2**30
SAMPLE_SECONDS = 0.05


@dataclass
class Result:
    program: str
    labelled: list[tuple[str, int]]  # (file in the program, line) marked confirmed
    own_seconds: float | None  # None: no NaN within the cap
    own_steps: int | None
    check_seconds: list[float] = field(default_factory=list)  # per seed
    peak_bytes: int = 0  # seed 0's check, all its processes: the sum of their resident sizes
    peak_pss_bytes: int = 0  # ... and of their proportional set sizes (shared pages divided)
    torch_starts: int = 0  # seed 0's check: processes that imported torch (``torch_starters``)
    floor: float = 0.0  # python -c "import torch", right before this program's checks
    confirmed_labelled: list[int] = field(default_factory=list)  # per seed: how many labelled lines confirmed
    false_confirmed: list[list[tuple[str, int]]] = field(
        default_factory=list
    )  # per seed: confirmed lines marked safe/unproven
    exit_codes: list[int] = field(default_factory=list)
    # seed 0: confirmations, and those whose witness keeps its inputs within the range the
    # program used (``Witness.beyond_examples`` <= 1, or no input graded: weights only)
    confirmations: int = 0
    within_range: int = 0

    @property
    def ratio(self) -> float | None:
        if self.own_seconds is None or not self.check_seconds:
            return None
        return self.own_seconds / self.check_seconds[0]


def _console_script() -> str:
    """``grist-lsp`` beside this interpreter, as a virtualenv puts it on PATH: the own runs start
    the interpreter itself, so a version manager's shim on PATH (pyenv's is shell scripts) would
    be charged to the check's side only."""
    beside = Path(sys.executable).parent / "grist-lsp"
    return str(beside) if beside.exists() else "grist-lsp"


def compile_like_an_install() -> None:
    """Write the bytecode of the grist_lsp package that will run (see the module docstring)."""
    import grist_lsp

    package = Path(grist_lsp.__file__).parent
    # compile_dir does not follow symlinks, and analyzer/, dynamic/ and server/ are linked in.
    for folder in {package, *(p.resolve() for p in package.iterdir() if p.is_dir())}:
        compileall.compile_dir(folder, quiet=1)


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc`` (Linux)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _tree(root: int) -> list[int]:
    """``root`` and all its descendants now."""
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def torch_starters(root: int) -> set[int]:
    """The processes under ``root`` that started one of grist's children by ``python -m``, each
    importing torch for itself (not the ``bwrap`` around one): a child forked from a fork server
    keeps its server's command line and is not one of them (its parent has the same one)."""
    kids, found, todo = _children(), set(), [root]
    while todo:
        pid = todo.pop()
        line = _cmdline(pid)
        program = os.path.basename(line.split(b"\0", 1)[0])
        if program.startswith(b"python") and b"\0-m\0grist_lsp.dynamic." in line:
            parent = next((p for p, ks in kids.items() if pid in ks), None)
            if parent is None or _cmdline(parent) != line:
                found.add(pid)
        todo.extend(kids.get(pid, []))
    return found


def tree_rss(root: int) -> int:
    """Bytes resident in ``root`` and all its descendants now (a page two of them share, as a
    forked child shares its server's, counts once per process)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
    return total


def tree_pss(root: int) -> int:
    """The proportional set size of ``root`` and its descendants: each resident page divided among
    the processes that share it, so the sum is the memory the whole tree really holds."""
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            pass
    return total


def import_torch_floor(runs: int = 1) -> float:
    """The median wall clock of ``python -c "import torch"`` here: what any check pays first."""
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, env=_one_thread_env())
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def check(target: str, cwd: Path, seed: int, budget: float | None) -> tuple[float, dict, int, int, int, int]:
    """Wall seconds of one whole check of ``target``, its JSON report, exit status, peak memory
    (the sum of resident sizes, and of proportional set sizes) and how many processes imported torch."""
    cmd = [_console_script(), "--check", target, "--format", "json", "--seed", str(seed), "--no-cache"]
    if budget is not None:
        cmd += ["--budget", str(budget)]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=_one_thread_env()
    )
    peak = peak_pss = 0
    starters: set[int] = set()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, peak_pss
        while not done.wait(SAMPLE_SECONDS):
            peak = max(peak, tree_rss(proc.pid))
            peak_pss = max(peak_pss, tree_pss(proc.pid))
            starters.update(torch_starters(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    seconds = time.monotonic() - t0
    done.set()
    sampler.join()
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        report = {"findings": [], "error": stderr[-2000:]}
    return seconds, report, proc.returncode, peak, peak_pss, len(starters)


def _labels(path: Path) -> tuple[list[tuple[str, int]], set[tuple[str, int]]]:
    """(file relative to the program, line) marked confirmed, and those marked safe/unproven."""
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    base = path if path.is_dir() else path.parent
    labelled, quiet = set(), set()
    for f in files:
        rel = f.relative_to(base).as_posix()
        for m in cm.parse_markers(f):
            if m.status == "confirmed":
                labelled.add((rel, m.line))
            elif m.status in ("safe", "unproven"):
                quiet.add((rel, m.line))
    return sorted(labelled), quiet


def bench_one(path: Path, seeds: int, cap: float, budget: float | None, own: bool) -> Result:
    labelled, quiet = _labels(path)
    with tempfile.TemporaryDirectory(prefix="grist-training-bench-") as tmp:
        if path.is_dir():
            copy = Path(tmp) / path.name
            shutil.copytree(path, copy)
            cwd, target = copy, "."
            own_seconds, line = None, ""
        else:
            copy = Path(tmp) / path.name
            shutil.copy(path, copy)
            cwd, target = Path(tmp), path.name
            own_seconds, line = time_to_nan_on_its_own(copy, cap, cwd=Path(tmp)) if own else (None, "")
        m = _STEP.search(line)
        result = Result(path.name, labelled, own_seconds, int(m.group(1)) if m else None)
        result.floor = round(import_torch_floor(), 2)
        for seed in range(seeds):
            seconds, report, code, peak, peak_pss, starts = check(target, cwd, seed, budget)
            confirmed = {
                ((cwd / f["file"]).resolve().relative_to(cwd.resolve()).as_posix(), f["line"])
                for f in report.get("findings", [])
                if f.get("status") == "confirmed"
            }
            result.check_seconds.append(round(seconds, 2))
            if seed == 0:
                witnesses = [
                    f.get("witness") or {}
                    for f in report.get("findings", [])
                    if f.get("status") == "confirmed"
                ]
                result.confirmations = len(witnesses)
                result.within_range = sum(
                    w.get("beyond_examples") is None or w["beyond_examples"] <= 1 for w in witnesses
                )
                result.peak_bytes = peak
                result.peak_pss_bytes = peak_pss
                result.torch_starts = starts
            result.confirmed_labelled.append(len(confirmed & set(labelled)))
            result.false_confirmed.append(sorted(confirmed & quiet))
            result.exit_codes.append(code)
    return result


def main(argv: list[str] | None = None) -> int:
    exit_on_sigterm()
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="programs (default: bench/training/*.py)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--cap", type=float, default=120.0, help="seconds a program may run on its own")
    ap.add_argument(
        "--budget", type=float, default=None, help="--budget passed to the check (default: its own)"
    )
    ap.add_argument("--no-own", action="store_true", help="skip the programs' own runs (check times only)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    files = [f.resolve() for f in args.files] or sorted(
        [
            *PROGRAMS.glob("*.py"),
            *(d for d in PROGRAMS.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))),
        ]
    )
    if shutil.which("grist-lsp") is None:
        print("grist-lsp is not on PATH: pip install -e . first", file=sys.stderr)
        return 2
    compile_like_an_install()
    rows = []
    print(
        f"{'program':36} {'own s':>7} {'steps':>7} {'check s':>8} {'floor':>6} {'-floor':>7} {'peak MiB':>9} {'PSS MiB':>8} {'torch':>5} {'ratio':>7} {'in range':>8}"
        "  labelled confirmed per seed"
    )
    for path in files:
        r = bench_one(path, args.seeds, args.cap, args.budget, not args.no_own and not path.is_dir())
        rows.append(r)
        own = (
            f"{r.own_seconds:.1f}"
            if r.own_seconds is not None
            else f">{args.cap:.0f}"
            if not args.no_own and not path.is_dir()
            else "-"
        )
        ratio = f"{r.ratio:.1f}x" if r.ratio is not None else "-"
        per_seed = " ".join(f"{c}/{len(r.labelled)}" for c in r.confirmed_labelled)
        in_range = f"{r.within_range}/{r.confirmations}"
        bad = [x for x in r.false_confirmed if x]
        print(
            f"{r.program:36} {own:>7} {r.own_steps or '-':>7} {r.check_seconds[0]:>8.2f} "
            f"{r.floor:>6.2f} {r.check_seconds[0] - r.floor:>7.2f} {r.peak_bytes / 2**20:>9.0f} {r.peak_pss_bytes / 2**20:>8.0f} {r.torch_starts:>5} {ratio:>7} {in_range:>8}  {per_seed}"
            + (f"  FALSE CONFIRMED {bad}" if bad else ""),
            flush=True,
        )
    checks = [r.check_seconds[0] for r in rows]
    floors = [r.floor for r in rows]
    beyond = [r.check_seconds[0] - r.floor for r in rows]
    ratios = [r.ratio for r in rows if r.ratio is not None]
    owns = [r.own_seconds if r.own_seconds is not None else args.cap for r in rows if not args.no_own]
    every = sum(1 for r in rows if all(c == len(r.labelled) for c in r.confirmed_labelled))
    print(
        f"\nprograms: {len(rows)}; confirmed at every labelled line on every seed ({args.seeds}): "
        f"{every}/{len(rows)}; false confirmations: {sum(len(x) for r in rows for x in r.false_confirmed)}"
    )
    if owns:
        print(f"own time to NaN, median (capped at {args.cap:.0f} s): {statistics.median(owns):.1f} s")
    print(
        f"whole-file check, median: {statistics.median(checks):.2f} s (min {min(checks):.2f}, max {max(checks):.2f}); "
        f"floor, median: {statistics.median(floors):.2f} s; check - floor, median: {statistics.median(beyond):.2f} s"
    )
    confirmations = sum(r.confirmations for r in rows)
    within = sum(r.within_range for r in rows)
    print(
        f"confirmations (seed 0) with inputs within the range the program used: {within}/{confirmations}"
        + (f" = {within / confirmations:.2f}" if confirmations else "")
        + " (goal >= 0.90)"
    )
    over = [r.program for r, b in zip(rows, beyond) if b > 3.0]
    heavy = [r.program for r in rows if r.peak_bytes >= GIB]
    heavy_pss = [r.program for r in rows if r.peak_pss_bytes >= GIB]
    print(
        f"goals: median check - floor < 1.0 s: {'met' if statistics.median(beyond) < 1.0 else 'NOT met'}; "
        f"programs over 3 s beyond the floor: {len(over)}{' ' + str(over) if over else ''}; "
        f"peak memory >= 1 GiB: {len(heavy)}{' ' + str(heavy) if heavy else ''} "
        f"(max {max(r.peak_bytes for r in rows) / 2**20:.0f} MiB resident), "
        f"{len(heavy_pss)}{' ' + str(heavy_pss) if heavy_pss else ''} "
        f"(max {max(r.peak_pss_bytes for r in rows) / 2**20:.0f} MiB proportional)"
    )
    starts = [r.torch_starts for r in rows]
    print(
        f"processes that imported torch, per check: median {statistics.median(starts):g}, max {max(starts)}"
    )
    if ratios:
        print(
            f"own time / check time, median over the {len(ratios)} programs that reach NaN by themselves "
            f"within {args.cap:.0f} s: {statistics.median(ratios):.1f}x (min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
        )
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "ratio": r.ratio} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
