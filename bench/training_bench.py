"""GRIST's headline on training programs: whole-file check time against the program's own time to NaN.

    python bench/training_bench.py                  # every bench/training/*.py, seed 0, own runs capped at 120 s
    python bench/training_bench.py --seeds 10       # stability: confirmed at the labelled lines on seeds 0..9
    python bench/training_bench.py --cap 60 bench/training/logreg_variable_while.py

Per program, in a scratch copy of it (programs write result files):

* **own**: ``python prog.py`` on one thread (as the engine's workers run), wall clock from
  launch until it prints its ``non-finite loss ... at step N`` line, capped at ``--cap``;
* **check**: the wall clock of ``grist-lsp --check prog.py --format json --seed S``, everything
  a user waits for: interpreter and torch start-up, the static pass, every site, the replay of
  each witness in a fresh process and the re-check of every fix;
* **labelled**: the lines marked ``# expect: confirmed <kind>`` that the check confirmed, per seed;
* **ratio**: own / check (seed 0), for the programs that reach NaN by themselves within the cap.

Medians are printed last: the check time over all programs and the ratio over those that
fail by themselves. Runs are sequential so that the two sides see the same machine.

grist-lsp's modules are compiled to bytecode first, as ``pip install`` does for a user's install
(torch's always are): an editable install run with ``PYTHONDONTWRITEBYTECODE`` set (as CI and
some machines set it) would otherwise recompile them in every process, 0.3-0.5 s a check that no
user pays.
"""

from __future__ import annotations

import argparse
import compileall
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
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


@dataclass
class Result:
    program: str
    labelled: list[int]  # lines marked confirmed
    own_seconds: float | None  # None: no NaN within the cap
    own_steps: int | None
    check_seconds: list[float] = field(default_factory=list)  # per seed
    confirmed_labelled: list[int] = field(default_factory=list)  # per seed: how many labelled lines confirmed
    false_confirmed: list[list[int]] = field(
        default_factory=list
    )  # per seed: confirmed lines marked safe/unproven
    exit_codes: list[int] = field(default_factory=list)

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


def check(path: Path, seed: int, budget: float | None) -> tuple[float, dict, int]:
    """Wall seconds of one whole-file check, its JSON report and its exit status."""
    cmd = [_console_script(), "--check", path.name, "--format", "json", "--seed", str(seed)]
    if budget is not None:
        cmd += ["--budget", str(budget)]
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=path.parent, env=_one_thread_env())
    seconds = time.monotonic() - t0
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        report = {"findings": [], "error": out.stderr[-2000:]}
    return seconds, report, out.returncode


def bench_one(path: Path, seeds: int, cap: float, budget: float | None, own: bool) -> Result:
    markers = cm.parse_markers(path)
    labelled = sorted({m.line for m in markers if m.status == "confirmed"})
    quiet = {m.line for m in markers if m.status in ("safe", "unproven")}
    with tempfile.TemporaryDirectory(prefix="grist-training-bench-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        own_seconds, line = time_to_nan_on_its_own(copy, cap, cwd=Path(tmp)) if own else (None, "")
        m = _STEP.search(line)
        result = Result(path.name, labelled, own_seconds, int(m.group(1)) if m else None)
        for seed in range(seeds):
            seconds, report, code = check(copy, seed, budget)
            confirmed = {f["line"] for f in report.get("findings", []) if f.get("status") == "confirmed"}
            result.check_seconds.append(round(seconds, 2))
            result.confirmed_labelled.append(len(confirmed & set(labelled)))
            result.false_confirmed.append(sorted(confirmed & quiet))
            result.exit_codes.append(code)
    return result


def main(argv: list[str] | None = None) -> int:
    exit_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="programs (default: bench/training/*.py)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--cap", type=float, default=120.0, help="seconds a program may run on its own")
    ap.add_argument(
        "--budget", type=float, default=None, help="--budget passed to the check (default: its own)"
    )
    ap.add_argument("--no-own", action="store_true", help="skip the programs' own runs (check times only)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    files = [f.resolve() for f in args.files] or sorted(PROGRAMS.glob("*.py"))
    if shutil.which("grist-lsp") is None:
        print("grist-lsp is not on PATH: pip install -e . first", file=sys.stderr)
        return 2
    compile_like_an_install()
    rows = []
    print(
        f"{'program':32} {'own s':>8} {'steps':>8} {'check s':>8} {'ratio':>7}  labelled confirmed per seed"
    )
    for path in files:
        r = bench_one(path, args.seeds, args.cap, args.budget, not args.no_own)
        rows.append(r)
        own = (
            f"{r.own_seconds:.1f}"
            if r.own_seconds is not None
            else f">{args.cap:.0f}"
            if not args.no_own
            else "-"
        )
        ratio = f"{r.ratio:.1f}x" if r.ratio is not None else "-"
        per_seed = " ".join(f"{c}/{len(r.labelled)}" for c in r.confirmed_labelled)
        bad = [x for x in r.false_confirmed if x]
        print(
            f"{r.program:32} {own:>8} {r.own_steps or '-':>8} {r.check_seconds[0]:>8.2f} {ratio:>7}  {per_seed}"
            + (f"  FALSE CONFIRMED {bad}" if bad else ""),
            flush=True,
        )
    checks = [r.check_seconds[0] for r in rows]
    ratios = [r.ratio for r in rows if r.ratio is not None]
    every = sum(1 for r in rows if all(c == len(r.labelled) for c in r.confirmed_labelled))
    print(
        f"\nprograms: {len(rows)}; confirmed at every labelled line on every seed: {every}/{len(rows)}; "
        f"false confirmations: {sum(len(x) for r in rows for x in r.false_confirmed)}"
    )
    print(
        f"whole-file check, median: {statistics.median(checks):.2f} s (min {min(checks):.2f}, max {max(checks):.2f})"
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
