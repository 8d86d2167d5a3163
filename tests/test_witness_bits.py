"""A witness is stored and replayed bit for bit: the values a failure needs exactly (a subnormal,
-0.0, the float32 next to a root) survive the witness -> JSON -> replay path, and a training
run's weights are put back as the values they were, not re-made from a delta."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.dynamic.replay import replay
from grist_lsp.dynamic.witness import from_value, shrink, to_value
from grist_lsp.model import Witness, to_json, witness_from_json

ROOT = -torch.tensor(1e-07, dtype=torch.float32)  # gain + 1e-07 is exactly 0 in float32 here only
SUBNORMAL = torch.tensor(1e-45, dtype=torch.float32)

# A gain trained from 1.0, behind an epsilon: the division fails only at the one float32 value
# ROOT, which no float32 delta added to 1.0 reaches.
GAIN = """\
import torch

x = torch.ones(4, 2)
gain = torch.ones(2, requires_grad=True)
opt = torch.optim.SGD([gain], lr=0.01)
for step in range(3):
    z = x / (gain + 1e-07)
    loss = z.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _bits(t: torch.Tensor) -> list[int]:
    return t.detach().contiguous().view(torch.int32).flatten().tolist()


def _through_json(w: Witness) -> Witness:
    return witness_from_json(json.loads(json.dumps(to_json(w))))


def test_subnormals_negative_zero_and_the_float32_next_to_a_root_survive_json():
    t = torch.stack([SUBNORMAL, torch.tensor(-0.0), torch.nextafter(ROOT, torch.tensor(0.0)), ROOT])
    w = Witness(
        entry="script:x.py",
        inputs={"x.py:1:torch.tensor#0": to_value(t)},
        weights_moved={},
        operand=None,
        result="nan",
        weight_values={"param#0": to_value(t)},
    )
    back = _through_json(w)
    for got in (from_value(back.inputs["x.py:1:torch.tensor#0"]), from_value(back.weight_values["param#0"])):
        assert got.dtype == torch.float32
        assert _bits(got) == _bits(t)
        assert math.copysign(1.0, float(got[1])) == -1.0


def _gain_witness(**weights: dict) -> Witness:
    return Witness(
        entry="script:gain.py", inputs={}, weights_moved={"gain": 1.0}, operand=None, result="nan", **weights
    )


def test_a_training_state_is_replayed_from_its_stored_bits(tmp_path: Path):
    path = tmp_path / "gain.py"
    path.write_text(GAIN)
    [site] = [v.site for v in analyze_source(str(path), GAIN) if v.site.kind == "div"]
    state = torch.stack([ROOT, torch.tensor(1.0)])
    exact = _through_json(_gain_witness(weight_values={"param#0": to_value(state)}, steps=0))
    assert replay(site, exact, GAIN).reproduced
    # The same state as a float32 delta from the weight at entry: 1.0 + delta rounds away from
    # ROOT, the divisor is not 0 and nothing fails (what witnesses used to store).
    delta = state - torch.ones(2)
    assert float((torch.ones(2) + delta)[0]) != float(ROOT)
    rounded = _through_json(_gain_witness(weight_deltas={"param#0": to_value(delta)}, steps=0))
    assert not replay(site, rounded, GAIN).reproduced
    # One representable value off the root is not a witness either: the replay judges the bits.
    near = torch.stack([torch.nextafter(ROOT, torch.tensor(0.0)), torch.tensor(1.0)])
    off = _through_json(_gain_witness(weight_values={"param#0": to_value(near)}, steps=0))
    assert not replay(site, off, GAIN).reproduced


def test_shrinking_keeps_a_witness_in_the_range_the_program_used():
    """Rounding 0.9998 to 1 would take images in [0, 1) past their range: that rounding is skipped
    for a finer one that keeps them inside (issue 37, item 6); without the range it is taken."""
    values = {"x": torch.tensor([[0.9998, 0.4321]])}
    top = float(values["x"].abs().max())  # as the worker measures the program's own inputs
    inside = shrink(values, lambda v: True, within={"x": top})
    assert float(inside["x"].abs().max()) <= top
    assert torch.equal(shrink(values, lambda v: True)["x"], torch.tensor([[1.0, 0.0]]))
