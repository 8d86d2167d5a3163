"""The Ray file executor: each unit is one Ray task, on a cluster at an address or a local one.

The task runs the caller's ``work`` (pickled by Ray) in a Ray worker process, which starts the
same sandboxed worker subprocesses a local run starts. A task whose Ray worker dies is run again
by Ray (``RETRIES`` times), then given up as ``Lost``; the other tasks go on. ``ray`` is imported
only here and only when this executor is made: a local or static-only run never loads it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from .files import Lost

Unit = TypeVar("Unit")
Result = TypeVar("Result")

INSTALL_HINT = "pip install 'grist-lsp[ray]'"
RETRIES = 2  # runs of a task after its worker died, before the unit is Lost
# Tests only, read by the driver and sent with each task: "N:FOLDER" kills the Ray worker of each
# task's first N attempts (counted in a file per task in FOLDER), so a test can see the retries
# and what is reported once they run out. Never set in a real run.
KILL_ATTEMPTS_ENV = "GRIST_TEST_RAY_KILL_ATTEMPTS"


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached: the message says what to do."""


def require_ray() -> None:
    """Raise ``RayUnavailable`` unless Ray can be found (without importing it: that takes seconds)."""
    if importlib.util.find_spec("ray") is None:
        raise RayUnavailable(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}")


def preload() -> None:
    """Import Ray (seconds) on a thread while the caller does other work; errors are left to ``__init__``."""
    try:
        import ray  # noqa: F401
    except Exception:
        pass


def _attempt(work: Callable[[Any], Any], unit: Any, key: str, kills: str | None) -> Any:
    """One attempt at a unit, in a Ray worker (``kills``: ``KILL_ATTEMPTS_ENV``'s value)."""
    if kills:
        count, _, folder = kills.partition(":")
        tally = os.path.join(folder, hashlib.sha256(key.encode()).hexdigest())
        with open(tally, "a") as f:
            f.write("x")
            killed = f.tell()
        if killed <= int(count):
            os._exit(1)  # the Ray worker dies mid-task, as one the OOM killer took would
    return work(unit)


def _quiet_driver() -> None:
    """Keep Ray's messages off this process's stdout, which holds the report (JSON, SARIF).

    ``log_to_driver=False`` stops the workers' own output, but the driver's error listener still
    prints the raylet's messages (a worker that died, say) to stdout; this run reports such a
    death itself (a retry, or the file's error). Ray has no public switch for that listener, so
    its module flag is turned off, when it is there."""
    try:
        import ray._private.worker as driver
    except ImportError:
        return
    if hasattr(driver, "_worker_logs_enabled"):
        driver._worker_logs_enabled = False


class RayExecutor:
    def __init__(self, address: str | None, num_cpus: int) -> None:
        try:
            import ray
            import ray.exceptions
        except ImportError as exc:
            raise RayUnavailable(
                f"--executor ray needs Ray, which could not be imported ({exc}): {INSTALL_HINT}"
            ) from None
        self._ray = ray
        _quiet_driver()
        self._pending: list[Any] = []
        address = address or os.environ.get("RAY_ADDRESS") or None
        self._owned = not ray.is_initialized()
        if not self._owned:
            return  # the caller's own session (a driver that imported us)
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        try:
            if address:
                ray.init(address=address, **quiet)
            else:
                # Only this run's cluster, on this machine: no dashboard, one CPU per task.
                ray.init(num_cpus=num_cpus, include_dashboard=False, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"--ray-address {address}" if address else "a local Ray cluster"
            raise RayUnavailable(
                f"{where}: cannot connect ({exc}); start one with `ray start --head` and pass its address, "
                "or leave --ray-address and RAY_ADDRESS unset for a local cluster"
            ) from None

    def map(
        self, work: Callable[[Unit], Result], units: Mapping[str, Unit]
    ) -> Iterator[tuple[str, Result | Lost]]:
        ray = self._ray
        import ray.exceptions as failures

        remote = ray.remote(num_cpus=1, max_retries=RETRIES)(_attempt)
        work_ref = ray.put(work)  # once, not once per task
        kill = os.environ.get(KILL_ATTEMPTS_ENV) or None
        keys = {remote.remote(work_ref, unit, key, kill): key for key, unit in units.items()}
        self._pending = list(keys)
        while self._pending:
            done, self._pending = ray.wait(self._pending, num_returns=1)
            for ref in done:
                key = keys[ref]
                try:
                    yield key, ray.get(ref)
                except failures.RayTaskError as exc:
                    # ``work`` raised: the same exception a local run would raise.
                    cause = exc.cause
                    raise (cause if isinstance(cause, Exception) else exc) from None
                except failures.RayError as exc:
                    yield (
                        key,
                        Lost(
                            f"the Ray worker checking it died on each of {RETRIES + 1} attempts "
                            f"({type(exc).__name__})"
                        ),
                    )

    def close(self) -> None:
        ray = self._ray
        for ref in self._pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing to stop
                pass
        self._pending = []
        if self._owned:
            ray.shutdown()
