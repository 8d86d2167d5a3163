"""Skip importing ``torch._dynamo`` in a child that runs a plain eager program.

Every optimizer step goes through ``torch._dynamo`` (a graph break, a ``disable`` wrapper) only
for the sake of ``torch.compile``; importing it costs about as much CPU as importing torch
itself, once per child (worker, replay, fix check), on the path between a user's save and the
squiggle. In eager mode both calls do nothing, so a child whose program shows no sign of
compilation gets a stand-in module that does nothing for them and imports the real
``torch._dynamo`` the moment anything else of it is asked for.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

# A program (or a library it imports) that may compile needs the real module from the start:
# its submodules cannot be imported through a stand-in.
_COMPILES = re.compile(r"compile|_dynamo|inductor|torch\.export|lightning|transformers|accelerate|deepspeed")


class _EagerDynamo(types.ModuleType):
    """``torch._dynamo`` as eager code sees it; anything else loads the real module."""

    def graph_break(self, *args: Any, **kwargs: Any) -> None:
        return None

    def disable(
        self,
        fn: Callable[..., Any] | None = None,
        recursive: bool = True,
        *,
        wrapping: bool = True,
        reason: str | None = None,
    ) -> Any:
        return fn if fn is not None else (lambda f: f)

    def is_compiling(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        import torch

        sys.modules.pop("torch._dynamo", None)
        real = importlib.import_module("torch._dynamo")
        torch._dynamo = real
        return getattr(real, name)


def skip_dynamo_import(texts: Iterable[str]) -> bool:
    """Install the stand-in unless a text may compile, or the real module is already loaded."""
    if "torch._dynamo" in sys.modules or any(_COMPILES.search(t) for t in texts):
        return False
    sys.modules["torch._dynamo"] = _EagerDynamo("torch._dynamo")
    return True
