"""What the sandbox costs: `grist-lsp --check` wall time with and without it.

    python bench/sandbox_bench.py                      # examples/*.py, budget 2 s, 3 rounds
    python bench/sandbox_bench.py --rounds 5 --budget 2 tests/corpus/programs/dice_loss.py

Each round runs the same check three ways, in turn (so a busy machine slows all three alike):
``--no-sandbox``, the audit-hook fallback (``GRIST_SANDBOX=audit``) and the default (bubblewrap
where it works). It prints the median wall clock of each, the overhead against no sandbox
(goal: under 10 %), and whether every way reported the same findings. Then, apart from the
check, the start-up cost of one child (``/bin/true`` and ``python -c "import torch"``) plain and
under the same bwrap command line the engine uses (``--startup-only``: that part alone).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grist_lsp.dynamic.sandbox import BwrapProbe, bwrap_argv, cache_folder  # noqa: E402

MODES = {  # name -> (extra CLI arguments, extra environment)
    "off": (["--no-sandbox"], {}),
    "audit hook": ([], {"GRIST_SANDBOX": "audit"}),
    "default": ([], {"GRIST_SANDBOX": "auto"}),
}


def run_check(files: list[str], budget: float, extra: list[str], env: dict[str, str]) -> tuple[float, list]:
    script = Path(sys.executable).parent / "grist-lsp"
    argv = [
        str(script),
        "--check",
        "--budget",
        str(budget),
        "--seed",
        "0",
        "--jobs",
        "2",
        "--format",
        "json",
        "--no-cache",  # every round runs the programs: that is what is measured
        *extra,
        *files,
    ]
    started = time.monotonic()
    proc = subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        timeout=3600,
    )
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"grist-lsp failed ({proc.returncode}): {proc.stderr[-2000:]}")
    findings = json.loads(proc.stdout)["findings"]
    return seconds, sorted((f["file"], f["line"], f["column"], f["status"]) for f in findings)


def child_startup(command: list[str], rounds: int) -> dict[str, float]:
    """Median seconds of ``command`` as a child, plain and under the engine's bwrap command line."""
    ways = {"plain": command}
    found = BwrapProbe().result([str(REPO)])
    if found.bwrap:
        ways["bwrap"] = bwrap_argv(found.bwrap, [str(REPO)], [cache_folder()], str(REPO)) + command
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(rounds):
        for name, argv in ways.items():
            started = time.monotonic()
            subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            times[name].append(time.monotonic() - started)
    return {k: statistics.median(v) for k, v in times.items()}


def print_startup() -> None:
    bare = child_startup(["/bin/true"], 20)
    print(
        "child start-up, /bin/true (median of 20): "
        + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in bare.items())
    )
    torch_child = child_startup([sys.executable, "-c", "import torch"], 5)
    print(
        "child start-up, python -c 'import torch' (median of 5): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in torch_child.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="programs to check (default: examples/*.py)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--startup-only", action="store_true", help="only the start-up cost of one child")
    args = parser.parse_args()
    if args.startup_only:
        print_startup()
        return
    files = args.files or sorted(str(p.relative_to(REPO)) for p in (REPO / "examples").glob("*.py"))
    found = BwrapProbe().result()
    print(f"bubblewrap: {'works (' + found.bwrap + ')' if found.bwrap else 'not available: ' + found.reason}")
    print(f"checking {len(files)} file(s), budget {args.budget:g} s, {args.rounds} round(s)")
    times: dict[str, list[float]] = {m: [] for m in MODES}
    results: dict[str, list] = {}
    for r in range(args.rounds):
        for mode, (extra, env) in MODES.items():
            seconds, findings = run_check(files, args.budget, extra, env)
            times[mode].append(seconds)
            results.setdefault(mode, findings)
            if findings != results[mode]:
                print(f"  note: round {r + 1} of {mode} reported other findings than round 1")
            print(f"  round {r + 1} {mode:>10}: {seconds:6.1f} s")
    base = statistics.median(times["off"])
    print("\nmedian wall clock of a check:")
    for mode in MODES:
        med = statistics.median(times[mode])
        print(f"  {mode:>10}: {med:6.1f} s  ({(med - base) / base * 100:+.1f} % against no sandbox)")
    for mode in MODES:
        if results[mode] != results["off"]:
            differ = sorted(set(results[mode]) ^ set(results["off"]))
            print(f"  findings of {mode} (round 1) differ from off: {differ}")
    same = all(results[m] == results["off"] for m in MODES)
    print(f"same findings with and without the sandbox (round 1): {'yes' if same else 'NO'}")
    print()
    print_startup()


if __name__ == "__main__":
    main()
