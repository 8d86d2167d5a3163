"""How fast the engine exposes a bug, per site, excluding worker start-up.

    python bench/engine_micro.py [--budget 2] [--jobs 2] [FILES...]

Runs the static pass and ``confirm`` on each program (default: tests/corpus/engine and
tests/corpus/programs), and prints, for every confirmed site, the search's own time to the
witness (``Witness.seconds``: runs of the program from the first search iteration to the
failing one; worker start-up, recording run, shrinking and replay are not included), its
iterations and how it was found; then the median and 90th percentile, and the wall-clock
time per file for context (that one includes two interpreter start-ups with torch).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.dynamic.engine import confirm
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.model import Status

ROOT = Path(__file__).resolve().parent.parent
BROKEN = {
    "hang.py",
    "hang_native.py",
    "segfault.py",
    "raises.py",
    "oom.py",
    "importerr.py",
}  # error-verdict programs


def default_files() -> list[Path]:
    files = [p for p in sorted((ROOT / "tests/corpus/engine").glob("*.py")) if p.name not in BROKEN]
    files += sorted((ROOT / "tests/corpus/programs").glob("*.py"))
    return files


def run(path: Path, budget: float) -> tuple[Path, list, float]:
    text = path.read_text(encoding="utf-8")
    verdicts = analyze_source(str(path), text)
    t0 = time.monotonic()
    out = confirm(
        str(path), text, verdicts, EngineOptions(budget=budget, timeout=30.0, project_root=str(path.parent))
    )
    return path, out, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--budget", type=float, default=2.0, help="search seconds per site")
    ap.add_argument("--jobs", type=int, default=2, help="files checked at once")
    args = ap.parse_args(argv)
    files = args.files or default_files()
    times: list[float] = []
    iters: list[int] = []
    walls: list[float] = []
    possible = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for path, out, wall in pool.map(lambda p: run(p, args.budget), files):
            walls.append(wall)
            for v in out:
                if v.status is Status.CONFIRMED and v.witness:
                    w = v.witness
                    times.append(w.seconds)
                    iters.append(w.iterations)
                    how = v.reason.rsplit("[", 1)[-1].split(",")[0]
                    print(
                        f"{path.name}:{v.site.span.start_line} {v.site.kind:7} {w.seconds:7.3f} s "
                        f"{w.iterations:5d} runs  {w.entry.split(':')[0]:6} {how}"
                    )
                elif v.status is Status.POSSIBLE:
                    possible += 1
                elif v.status is Status.ERROR:
                    print(f"{path.name}: error: {v.message}")
    if not times:
        print("no bug confirmed")
        return 1
    times.sort()
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    print(f"\nconfirmed {len(times)} sites ({possible} left possible) in {len(files)} files")
    print(
        f"time to expose (search only): median {statistics.median(times):.3f} s, p90 {p90:.3f} s, "
        f"max {times[-1]:.3f} s; median {statistics.median(iters):.0f} runs"
    )
    print(
        f"wall clock per file (start-up, recording, search, shrink, replay): median {statistics.median(walls):.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
