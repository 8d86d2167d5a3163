"""Children started before any file is known to need them.

Most of a one-file check's wall clock is its children's ``import torch`` (seconds), and the
caller has other work first: reading options, discovering files, the static pass, probing the
sandbox. ``Spares`` starts one search worker and one warm child (the fix checks' kind, made by
the caller's factory: this layer does not import the fix checks) at the beginning of a check,
so torch imports while the caller does that work. Each spare is handed out once, to the first
file whose own children would have been started identically (same confinement, same memory
cap); a spare nobody took is killed by ``close``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from ..options import EngineOptions
from ..sandbox import Confinement
from .child import WORKER_MODULE, Subprocess, WarmChild, child_confinement

W = TypeVar("W", bound=WarmChild, covariant=True)  # a Spares of a SharedChild is a Spares of a WarmChild


class Spares(Generic[W]):
    """One worker and one warm child (``warm_child(options, path)``), started now for files
    under ``path``'s project."""

    def __init__(
        self, options: EngineOptions, path: str, warm_child: Callable[[EngineOptions, str], W]
    ) -> None:
        self._lock = threading.Lock()
        self._confinement = child_confinement(options, path)
        self._memory_mb = options.memory_mb
        # The sandbox ties a child's life to the thread that started it (a parent-death signal):
        # the worker is started from a thread that lives until ``close``, not from the caller's.
        self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grist-spare")
        self._worker: Future[Subprocess] | None = self._owner.submit(
            Subprocess, WORKER_MODULE, options.memory_mb, self._confinement
        )
        self._shared_key = (options.memory_mb, options.timeout, self._confinement)
        self._shared: W | None = warm_child(options, path)
        self._shared.start()

    def worker(self, confinement: Confinement | None, memory_mb: int) -> Subprocess | None:
        """The spare worker, once, for a file whose worker would be started just like it."""
        with self._lock:
            if self._worker is None or (confinement, memory_mb) != (self._confinement, self._memory_mb):
                return None
            future, self._worker = self._worker, None
        return future.result()

    def shared_child(self, options: EngineOptions, path: str) -> W | None:
        """The spare warm child, once; its new holder closes it."""
        key = (options.memory_mb, options.timeout, child_confinement(options, path))
        with self._lock:
            if self._shared is None or key != self._shared_key:
                return None
            shared, self._shared = self._shared, None
        return shared

    def close(self) -> None:
        """Kill what nobody took; wait for nothing else."""
        with self._lock:
            worker, self._worker = self._worker, None
            shared, self._shared = self._shared, None
        if worker is not None:
            worker.result().discard()
        if shared is not None:
            shared.close(used=False)
        self._owner.shutdown(wait=False)
