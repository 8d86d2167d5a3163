"""``EngineOptions``: how hard and where the engine looks, shared by the engine, the fix checks and
the executors that start their children (one definition below all of them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .sandbox import BwrapProbe


@dataclass
class EngineOptions:
    """How hard and where to look. Times in seconds."""

    budget: float = 5.0  # search time per site
    seed: int = 0
    jobs: int = 1  # worker processes per file
    entries: list[str] = field(default_factory=list)  # "path.py:function" (--entry, [tool.grist] entries)
    # Absolute script path -> the command-line arguments it runs with (--script-args, [tool.grist] script-args).
    script_args: dict[str, list[str]] = field(default_factory=dict)
    project_root: str | None = None
    # Wall clock for starting the program and reaching its sites; a worker is killed after
    # timeout + budget * (its sites) + a small margin for shrinking and start-up.
    timeout: float = 30.0
    memory_mb: int = 4096  # address-space limit of a worker (RLIMIT_AS)
    write_reproducers: str | None = None  # folder for pytest reproducers of confirmed bugs
    # Enter the program only through this file (a test file or a script that imports the checked
    # module): how a check of that file reports bugs in the modules it runs.
    via: str | None = None
    sandbox: str = "auto"  # "auto": bubblewrap where it works, else an audit hook; "off": none
    # Whether bubblewrap works, asked once for every child started with these options.
    sandbox_probe: BwrapProbe = field(default_factory=BwrapProbe, repr=False, compare=False)
