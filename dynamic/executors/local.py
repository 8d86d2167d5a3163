"""The local file executor: each unit on a thread of this process (its workers are subprocesses,
so threads are enough to keep ``workers`` of them busy)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

from .files import Lost

Unit = TypeVar("Unit")
Result = TypeVar("Result")


class LocalExecutor:
    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grist-file")

    def map(
        self, work: Callable[[Unit], Result], units: Mapping[str, Unit]
    ) -> Iterator[tuple[str, Result | Lost]]:
        futures = {self._pool.submit(work, unit): key for key, unit in units.items()}
        for future in as_completed(futures):
            yield futures[future], future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
