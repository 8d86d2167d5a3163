"""One seed, one report: the same check at ``-j 1`` and ``-j 2``, on an idle and a busy machine.

    python bench/reproducible.py                       # examples/, seed 0, 5 runs at -j 1 and 5 at -j 2
    python bench/reproducible.py --runs 2 examples/vae.py --budget 2

Runs ``grist-lsp --check PATH --seed 0 --format json -j J`` ten times (``--runs`` at each of
``-j 1`` and ``-j 2``, alternating), with one busy process beside it (a CPU burner this bench
starts itself, ``python -c "while True: pass"``) for half of them, and prints how many reports
differ from the first. Goal: 0.

What is taken out of a report before comparing (nothing else is):

* times: ``stats.seconds`` (the check's wall clock) and every finding's ``witness.seconds``
  (the search's clock when it found the witness);
* the option varied on purpose: ``stats.jobs``.

For a report that differs, the first few paths that differ are printed (``findings[2].witness.
iterations: 14 != 12``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TIME_FIELDS = ("stats.seconds", "findings[].witness.seconds")
VARIED_FIELDS = ("stats.jobs",)


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` without its times and the option varied (``TIME_FIELDS``, ``VARIED_FIELDS``)."""
    out = json.loads(json.dumps(report))
    for name in ("seconds", "jobs"):
        out.get("stats", {}).pop(name, None)
    for finding in out.get("findings", []):
        if isinstance(finding.get("witness"), dict):
            finding["witness"].pop("seconds", None)
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` and ``b`` differ, with both values (short)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if a != b:
        return [f"{path}: {json.dumps(a)[:80]} != {json.dumps(b)[:80]}"]
    return []


def check(paths: list[str], jobs: int, seed: int, budget: float | None) -> tuple[dict[str, Any], float]:
    argv = [sys.executable, "-m", "grist_lsp", "--check", *paths, "--seed", str(seed)]
    argv += ["--format", "json", "-j", str(jobs), "--no-cache"]  # each run searches: no cached answer
    if budget is not None:
        argv += ["--budget", str(budget)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        sys.exit(f"grist-lsp exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout), seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["examples/"], help="what to check (default: examples/)")
    ap.add_argument("--runs", type=int, default=5, help="runs at each of -j 1 and -j 2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=None, help="--budget for the checks (default: theirs)")
    ap.add_argument("--save", type=Path, help="write each report here as run<N>.json")
    args = ap.parse_args()
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)

    plan = []  # (jobs, busy): alternating -j 1 / -j 2, a busy process beside every other run
    for i in range(2 * args.runs):
        plan.append((1 if i % 2 == 0 else 2, (i // 2 + i) % 2 == 1))
    first: dict[str, Any] | None = None
    differ = 0
    print(f"{'run':>3}  {'-j':>2}  {'busy':>4}  {'seconds':>7}  confirmed possible  same as the first")
    for i, (jobs, busy) in enumerate(plan):
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        try:
            report, seconds = check(args.paths, jobs, args.seed, args.budget)
        finally:
            if burner is not None:
                burner.kill()
                burner.wait()
        if args.save:
            (args.save / f"run{i}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
        now = comparable(report)
        stats = report.get("stats", {})
        if first is None:
            first, same = now, "(the first)"
            diffs: list[str] = []
        else:
            diffs = differences(first, now)
            same = "yes" if not diffs else f"NO ({len(diffs)} fields)"
            differ += bool(diffs)
        print(
            f"{i:>3}  {jobs:>2}  {'yes' if busy else 'no':>4}  {seconds:>7.1f}  "
            f"{stats.get('confirmed', 0):>9} {stats.get('possible', 0):>8}  {same}"
        )
        for d in diffs[:6]:
            print(f"       {d}")
    print(
        f"\nreports that differ from the first: {differ} of {len(plan)} "
        f"(times removed: {', '.join(TIME_FIELDS)}; option varied: {', '.join(VARIED_FIELDS)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
