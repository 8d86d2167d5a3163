"""Preconditions a program states are the search's domain, never a witness.

An ``assert``, a ``torch._assert``, a raising guard in the function or in a helper it calls:
each keeps a division from being confirmed (the static pass may even prove it safe), and a
finding left ``possible`` says the search kept stopping there; the same division with no
precondition is confirmed. One script per form, checked together through the real CLI.
"""

from __future__ import annotations

import json
import subprocess

import pytest

HEADER = "import torch\n\n\ndef positive(d):\n    if (d <= 0).any():\n        raise ValueError('d must be positive')\n\n\n"
FOOTER = "\n\nprint(f(torch.randn(6), torch.rand(6) + 0.5).sum())\n"
# file -> (function body, line of its division, line where the search must stop)
FORMS = {
    "by_assert.py": (
        "def f(x, d):\n    assert (d > 0).all(), 'd must be positive'\n    return x / d",
        11,
        10,
    ),
    "by_torch_assert.py": (
        "def f(x, d):\n    torch._assert((d > 0).all(), 'd must be positive')\n    return x / d",
        11,
        10,
    ),
    "by_guard.py": (
        "def f(x, d):\n    if (d <= 0).any():\n        raise ValueError('d must be positive')\n"
        "    return x / d",
        12,
        11,
    ),
    "by_helper.py": ("def f(x, d):\n    positive(d)\n    return x / d", 11, 6),
}
UNGUARDED = ("unguarded.py", "def f(x, d):\n    return x / d", 10)


@pytest.fixture(scope="module")
def findings(tmp_path_factory, grist_script) -> dict[str, dict]:
    project = tmp_path_factory.mktemp("preconditions")
    for name, (body, _, _) in {**FORMS, UNGUARDED[0]: (UNGUARDED[1], 0, 0)}.items():
        (project / name).write_text(HEADER + body + FOOTER, encoding="utf-8")
    result = subprocess.run(
        [grist_script, "--check", ".", "--format", "json", "--budget", "2", "--show-safe"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    return {
        f"{f['file'].split('/')[-1]}:{f['line']}": f
        for f in json.loads(result.stdout)["findings"]
        if f["kind"] == "div"
    }


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_stated_precondition_keeps_the_division_from_being_confirmed(findings, name):
    _, line, wall = FORMS[name]
    finding = findings[f"{name}:{line}"]
    assert finding["status"] in ("possible", "safe"), finding
    if finding["status"] == "possible":
        # The user sees that the guard is doing its job.
        assert f"the search stopped at the precondition on line {wall} of {name}" in finding["reason"], (
            finding
        )


def test_a_guard_in_a_helper_is_a_wall_the_finding_names(findings):
    finding = findings["by_helper.py:11"]
    assert finding["status"] == "possible"
    assert "the search stopped at the precondition on line 6 of by_helper.py" in finding["reason"], finding


def test_the_same_division_without_a_precondition_is_confirmed(findings):
    name, _, line = UNGUARDED
    assert findings[f"{name}:{line}"]["status"] == "confirmed", findings[f"{name}:{line}"]
