"""What every file executor promises: run ``work`` on each unit, yield each result as it comes.

A unit is one file's check (the caller's ``work`` knows what that is); an executor decides only
where it runs. A unit no worker could finish (a Ray worker that died on every attempt) comes
back as ``Lost`` with the reason, so the caller reports that file and keeps the others; an
exception ``work`` itself raised is raised again here, as a local run raises it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

Unit = TypeVar("Unit")
Result = TypeVar("Result")


@dataclass(frozen=True)
class Lost:
    """A unit no worker finished, and why (in words that fit after the file's name)."""

    reason: str


class FileExecutor(Protocol):
    def map(
        self, work: Callable[[Unit], Result], units: Mapping[str, Unit]
    ) -> Iterator[tuple[str, Result | Lost]]:
        """``work(unit)`` for every unit, yielded by key as each finishes (any order)."""
        ...

    def close(self) -> None:
        """Stop what is still running (after an interrupt) and release the workers."""
        ...
