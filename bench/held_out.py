"""Check programs as a new user would, one at a time, and print what each took and found.

    python bench/held_out.py PROGRAM.py [PROGRAM.py ...] [--budget 20]

For programs this repository does not hold (GRIST's own subjects, a project's scripts): each is
checked from its own folder as ``grist-lsp --check NAME --budget B --no-cache --format json``
with nothing else given, and the row says the whole check's wall clock (start-up, every site,
fix checks) and the lines it confirmed, left possible, or could not run (``error``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def check(path: Path, budget: float) -> tuple[float, dict[str, list[str]]]:
    """The check's wall clock and its non-safe findings as ``line:kind`` per status."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "grist_lsp", "--check", path.name, "--budget", str(budget), "--no-cache"]
        + ["--format", "json"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - t0
    by_status: dict[str, list[str]] = {}
    try:
        findings = json.loads(proc.stdout)["findings"]
    except (json.JSONDecodeError, KeyError):
        return seconds, {"error": [f"no report (exit {proc.returncode}): {proc.stderr[-200:]}"]}
    for f in findings:
        if f["status"] != "safe":
            by_status.setdefault(f["status"], []).append(f"{f['line']}:{f['kind']}")
    return seconds, by_status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="+", type=Path)
    ap.add_argument("--budget", type=float, default=20.0)
    args = ap.parse_args(argv)
    times = []
    for path in args.programs:
        seconds, found = check(path.resolve(), args.budget)
        times.append(seconds)
        row = "  ".join(f"{status}: {' '.join(lines)}" for status, lines in sorted(found.items()))
        print(f"{str(path):55} {seconds:6.2f} s  {row}", flush=True)
    print(
        f"\nprograms: {len(times)}; whole check median {statistics.median(times):.2f} s, max {max(times):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
