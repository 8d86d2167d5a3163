"""The result-pipe messages (dynamic/protocol.py): what one end writes, the other reads back whole."""

from __future__ import annotations

from grist_lsp.dynamic import protocol
from grist_lsp.dynamic.protocol import (
    Blocked,
    Done,
    Ready,
    ReplayAnswer,
    ReplayTask,
    RunError,
    RunTask,
    SiteReport,
    TaskResult,
)
from grist_lsp.model import Site, Span, TensorValue, Witness


def _witness() -> Witness:
    return Witness(
        entry="script:train.py",
        inputs={"train.py:3:torch.randn#0": TensorValue([1, 2], "float32", [[0.0, -1.5]])},
        weights_moved={"W": 2.0},
        operand=None,
        result="-inf",
        steps=12,
        at_step=12,
    )


def test_every_message_reads_back_as_it_was_written():
    witness = _witness()
    messages = [
        Ready(4242),
        SiteReport("3:7:torch.log", witness, "script:train.py", "training run (GRIST), 12 steps", "log of 0"),
        SiteReport("5:1:torch.sqrt", None, None, "not reached by any entry"),
        ReplayAnswer("3:7:torch.log", True, "torch.log produced -inf from finite operands", "-inf"),
        TaskResult(3, {"reproduced": False, "detail": "finite"}),
        RunError("train.py: No module named 'foo'", 2, 0),
        Blocked("write", "/home/user/model.pt"),
        Done(),
    ]
    for msg in messages:
        text = protocol.line(msg)
        assert text.endswith("\n") and text.count("\n") == 1, text
        assert protocol.decode(text) == msg


def test_a_line_that_is_no_message_is_skipped_not_fatal():
    for text in ("", "not json\n", '{"type": "unknown"}\n', '{"type": "site"}\n', "[1, 2]\n", '{"ke'):
        assert protocol.decode(text) is None, text


def test_every_task_reads_back_with_its_id():
    site = Site("train.py", Span(3, 7, 3, 20), "torch.log", "log", "input", "torch.log(h)")
    tasks = [
        ReplayTask("train.py", "import torch\n", site, _witness()),
        RunTask("train.py", "import torch\n", "script:train.py", 2, "/tmp/out.pt"),
        RunTask("train.py", "x = 1\n", "test:t.py::test_a", 0, "/tmp/new.pt", compare_with="/tmp/out.pt"),
    ]
    for ident, task in enumerate(tasks, 1):
        assert protocol.decode_task(protocol.task_line(task, ident)) == (ident, task)
