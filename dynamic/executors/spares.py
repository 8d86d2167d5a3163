"""The children of one check: started before any file is known to need them, and one fork
server for all of its files.

Most of a one-file check's wall clock is its children's ``import torch`` (seconds), and the
caller has other work first: reading options, discovering files, the static pass, probing the
sandbox. ``Spares`` starts one warm child (the fix checks' kind, made by the caller's factory:
this layer does not import the fix checks) at the beginning of a check, and with it the fork
server every other child is forked from (the search worker, the fix checks' workers:
``verify.SharedChild.child``), so torch imports once, while the caller does that work. The spare
is handed out once, to the first file whose own children would have been started identically
(same confinement, same memory cap, same timeout); the other files get warm children of their
own, forked from the same server when their sandbox is the same (``ForkServers``: the files of
one project), so a check of several files checked at once still imports torch once. ``close``
kills a spare nobody took and stops the servers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ..options import EngineOptions
from .child import WarmChild, child_confinement, worker_env
from .forkserver import ForkServers

W = TypeVar("W", bound=WarmChild, covariant=True)  # a Spares of a SharedChild is a Spares of a WarmChild


class Spares(Generic[W]):
    """One warm child (``warm_child(options, path, servers)``, with the fork server), started now
    for files under ``path``'s project, and warm children for the check's other files."""

    def __init__(
        self,
        options: EngineOptions,
        path: str,
        warm_child: Callable[[EngineOptions, str, ForkServers | None], W],
    ) -> None:
        self._lock = threading.Lock()
        self._warm_child = warm_child
        self.servers = ForkServers(worker_env)
        self._shared_key = (options.memory_mb, options.timeout, child_confinement(options, path))
        self._shared: W | None = warm_child(options, path, self.servers)
        self._shared.start()

    def shared_child(self, options: EngineOptions, path: str) -> W | None:
        """The spare warm child, once; its new holder closes it."""
        key = (options.memory_mb, options.timeout, child_confinement(options, path))
        with self._lock:
            if self._shared is None or key != self._shared_key:
                return None
            shared, self._shared = self._shared, None
        return shared

    def warm_child(self, options: EngineOptions, path: str) -> W:
        """A warm child for ``path``: the spare when it fits, else a new one forked from the
        check's server for ``path``'s sandbox; its holder closes it."""
        return self.shared_child(options, path) or self._warm_child(options, path, self.servers)

    def close(self) -> None:
        """Kill what nobody took and stop the check's fork servers: after the last file."""
        with self._lock:
            shared, self._shared = self._shared, None
        if shared is not None:
            shared.close(used=False)
        self.servers.close()
