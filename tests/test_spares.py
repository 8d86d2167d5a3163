"""Children started ahead of the static pass (``dynamic/executors/spares.py``): handed out once, to a file
whose children would be started the same way, and none left running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grist_lsp.check import CheckOptions, check_paths
from grist_lsp.dynamic.executors import child
from grist_lsp.dynamic.executors.spares import Spares
from grist_lsp.dynamic.options import EngineOptions
from grist_lsp.dynamic.verify import SharedChild
from grist_lsp.model import Status
from grist_lsp.service import Service

PROGRAM = """import torch

x = torch.randn(8)
y = torch.log(x)
print(y.sum())
"""


def test_the_spare_goes_once_and_only_to_a_matching_file(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    options = EngineOptions(project_root=str(tmp_path))
    spares = Spares(options, str(program), SharedChild)
    try:
        assert (
            spares.shared_child(EngineOptions(project_root=str(tmp_path), timeout=1.0), str(program)) is None
        )  # another timeout
        shared = spares.shared_child(options, str(program))
        assert shared is not None
        assert spares.shared_child(options, str(program)) is None  # handed out once
        shared.close()
    finally:
        spares.close()


def test_close_kills_the_spares_nobody_took(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    options = EngineOptions(project_root=str(tmp_path))
    started: list[child.Subprocess] = []
    original = child.Subprocess.__init__

    def recording(self: child.Subprocess, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        started.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(child.Subprocess, "__init__", recording)
        Spares(options, str(program), SharedChild).close()
    assert len(started) == 1, "the warm child"
    for started_child in started:
        assert started_child.proc.wait(timeout=10) is not None


def test_a_checks_children_start_before_its_static_pass_and_are_its_only_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    modules: list[str] = []
    original = child.Subprocess.__init__

    def recording(self: child.Subprocess, module: str, *args: Any, **kwargs: Any) -> None:
        modules.append(module)
        original(self, module, *args, **kwargs)

    static = Service.static

    def static_recording(self: Service, *args: Any, **kwargs: Any) -> Any:
        modules.append("static pass")
        return static(self, *args, **kwargs)

    monkeypatch.setattr(child.Subprocess, "__init__", recording)
    monkeypatch.setattr(Service, "static", static_recording)
    # A cache of its own, cold: the suite's other checks may have warmed the default one.
    report = check_paths([str(program)], CheckOptions(budget=2.0, cache_dir=str(tmp_path / "cache")))
    [log] = [v for v in report.verdicts if v.site.op == "torch.log"]
    assert log.status is Status.CONFIRMED
    # The warm child starts before the static pass (torch imports meanwhile, in its fork server);
    # the worker is forked from that server once the file is known.
    assert modules[0] == "grist_lsp.dynamic.verify"
    assert modules.index("static pass") < modules.index("grist_lsp.dynamic.worker")
    assert sorted(modules) == ["grist_lsp.dynamic.verify", "grist_lsp.dynamic.worker", "static pass"]
