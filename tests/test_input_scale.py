"""How far a witness's inputs went from the program's own, said on the finding, and `max-input-scale`.

`log(softmax(x))` over `randn` breaks only when one logit is pushed ~100 away from the
others: far outside what `torch.randn` ever gives. The engine confirms it; a team that
wants only bugs reachable with its own data says `--max-input-scale 1` and gets a
`possible` finding that says why.
"""

from __future__ import annotations

import json

SCRIPT = "import torch\nx = torch.randn(8)\nprint(torch.log(torch.softmax(x, 0)))\n"


def _only_finding(result) -> dict:
    assert result.returncode in (0, 1), result.stderr
    (finding,) = json.loads(result.stdout)["findings"]
    return finding


def test_max_input_scale_keeps_a_far_witness_from_confirming(grist_cli, write_tree) -> None:
    root = write_tree({"softmax_log.py": SCRIPT})
    args = ("--check", "softmax_log.py", "--format", "json", "--jobs", "1", "--seed", "0")

    confirmed = _only_finding(grist_cli(*args, cwd=root))
    assert confirmed["status"] == "confirmed", confirmed
    scale = confirmed["witness"]["beyond_examples"]
    assert scale > 1
    assert confirmed["witness"]["input_scale"].startswith("inputs up to ")
    assert confirmed["witness"]["input_scale"].endswith("x the range the program used")

    refused = _only_finding(grist_cli(*args, "--max-input-scale", "1", cwd=root))
    assert refused["status"] == "possible" and refused["witness"] is None
    assert refused["reason"].startswith("a witness was found but needs inputs ")
    assert "x the program's own range, beyond max-input-scale 1" in refused["reason"]

    # The same from [tool.grist].
    (root / "pyproject.toml").write_text("[tool.grist]\nmax-input-scale = 1\n", encoding="utf-8")
    configured = _only_finding(grist_cli(*args, cwd=root))
    assert configured["status"] == "possible" and "beyond max-input-scale 1" in configured["reason"]


def test_text_output_states_the_input_scale(grist_cli, write_tree) -> None:
    root = write_tree({"softmax_log.py": SCRIPT})
    result = grist_cli("--check", "softmax_log.py", "--jobs", "1", "--seed", "0", cwd=root)
    assert result.returncode == 1, result.stderr
    (witness,) = [line for line in result.stdout.splitlines() if line.strip().startswith("witness:")]
    assert "x the range the program used" in witness


def test_bad_max_input_scale_is_a_usage_error(grist_cli, write_tree) -> None:
    root = write_tree({"softmax_log.py": SCRIPT})
    flag = grist_cli("--check", ".", "--static-only", "--max-input-scale", "0.5", cwd=root)
    assert flag.returncode == 2 and "--max-input-scale" in flag.stderr
    (root / "pyproject.toml").write_text('[tool.grist]\nmax-input-scale = "big"\n', encoding="utf-8")
    config = grist_cli("--check", ".", "--static-only", cwd=root)
    assert (
        config.returncode == 2 and "pyproject.toml" in config.stderr and "`max-input-scale`" in config.stderr
    )
