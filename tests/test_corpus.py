"""The static pass and the engine against the hand-checked markers of the program corpus.

Markers (``# expect: <status> <kind>``, see tests/corpus/corpus_markers.py) say
what a person established for each unsafe op of examples/ and
tests/corpus/programs/; tests/test_corpus_markers.py proves every `confirmed`
one with a hand-made input.

* Static, every program: the reported sites are exactly the marked ones (line
  and kind); `confirmed`/`possible` markers are `possible` statically, `safe`
  markers are `safe` (or not a site at all), `unproven` ones either; no
  `possible` site goes unmarked.
* Dynamic, a subset covering every kind of entry (script, probe, explicit
  entry function, pytest test beside the module) and the safe forms the static
  pass cannot prove: every `confirmed` marker becomes `confirmed` at its line
  with a witness whose result is NaN/INF; nothing marked `safe` or `unproven`
  becomes confirmed. `possible` markers may go either way. The whole corpus,
  over several seeds, runs in bench/engine_bench.py.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_file  # noqa: E402
from grist_lsp.dynamic.engine import confirm  # noqa: E402
from grist_lsp.dynamic.options import EngineOptions  # noqa: E402
from grist_lsp.model import Status  # noqa: E402

PROGRAMS = cm.program_files()

# One file per way in, plus the two whose safe exp the static pass cannot prove
# (the engine must leave them alone). Small budgets keep the whole test bounded.
DYNAMIC_SUBSET = [
    cm.EXAMPLES / "mnist_classifier.py",  # script + function probes
    cm.PROGRAMS / "entry_mdn.py",  # explicit grist_entry()
    cm.PROGRAMS / "ranking_loss.py",  # pytest file beside it
    cm.PROGRAMS / "masked_attention_safe.py",  # unproven exp: must stay unconfirmed
    cm.PROGRAMS / "entropy_bonus_safe.py",  # unproven exp behind a method return
    cm.PROGRAMS / "negbin_loss.py",  # lgamma poles, exp overflow, logs of underflowed values
    cm.PROGRAMS / "tanh_policy.py",  # atanh at the tanh bound, next to clamped safe forms
    cm.PROGRAMS / "angular_loss.py",  # acos of a hand cosine that rounds above 1
    cm.PROGRAMS / "ppo_loss.py",  # std of one element, 0 / 0 on identical rewards
    # The GRIST-style training script: weights are factory tensors made trainable and
    # handed to torch.optim (once "can't optimize a non-leaf Tensor" in script mode).
    cm.PROGRAMS / "training_lr_blowup.py",
    # A learned temperature that must cross or approach 0 (weights move, scalars first).
    cm.EXAMPLES / "contrastive.py",
    # Shapes the script never makes: a probe, kept to the (ReLU, >= 0) values callers pass.
    cm.PROGRAMS / "feature_statistics.py",
]
BUDGET = 1.5
# A whole training script per iteration is slow, and the budget is wall-clock seconds: at
# 1.5 s on a loaded machine the search got ~35 runs and its weights had not started moving.
# contrastive.py's log:46 is exposed by a probe of NTXent after the script entry has had its
# turn: at 1.5 s on a loaded machine the probe got 0.4 s and stopped at a distance of 8e-9.
SCRIPT_BUDGET = {"training_lr_blowup.py": 6.0, "contrastive.py": 3.0}


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_static_pass_reports_exactly_the_marked_sites(path):
    verdicts = analyze_file(str(path))
    assert not [v for v in verdicts if v.status is Status.ERROR], "the static pass could not analyse the file"
    problems = cm.static_problems(cm.match_markers(path, verdicts))
    assert problems == []


def test_corpus_is_large_and_mixed():
    statuses = [m.status for p in PROGRAMS for m in cm.parse_markers(p)]
    kinds = {m.kind for p in PROGRAMS for m in cm.parse_markers(p)}
    assert len(PROGRAMS) >= 24
    assert statuses.count("confirmed") >= 40 and statuses.count("safe") >= 30
    assert {"log", "div", "sqrt", "rsqrt", "exp", "pow", "acos", "atanh", "lgamma", "var", "mean"} <= kinds


def _entries(path: Path) -> list[str]:
    return [f"{path}:grist_entry"] if "\ndef grist_entry(" in path.read_text() else []


@pytest.fixture(scope="module")
def engine_results():
    """confirm() over the subset, two files at a time (each runs its own worker process)."""

    def run(path: Path):
        static = analyze_file(str(path))
        options = EngineOptions(
            budget=SCRIPT_BUDGET.get(path.name, BUDGET),
            seed=0,
            jobs=1,
            project_root=str(cm.REPO),
            entries=_entries(path),
        )
        return path, confirm(str(path), path.read_text(), static, options)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, DYNAMIC_SUBSET))


@pytest.mark.parametrize("path", DYNAMIC_SUBSET, ids=lambda p: p.name)
def test_engine_confirms_marked_bugs_and_nothing_safe(engine_results, path):
    final = engine_results[path]
    assert not [v.reason for v in final if v.status is Status.ERROR]
    matches = cm.match_markers(path, final)
    missed, wrong = [], []
    for m in matches:
        status = m.verdict.status if m.verdict is not None else None
        want = m.marker.status if m.marker is not None else None
        if want == "confirmed":
            if status is not Status.CONFIRMED:
                missed.append(f"{m.line} {m.kind}: {m.verdict.reason if m.verdict else 'no site'}")
                continue
            w = m.verdict.witness
            assert w is not None and w.result in ("nan", "inf", "-inf"), (
                f"line {m.line}: confirmed without a witness"
            )
            assert m.verdict.site.span.start_line == m.line
        elif want in ("safe", "unproven", None) and status is Status.CONFIRMED:
            wrong.append(f"{m.line} {m.kind} ({want}): witness {m.verdict.witness.entry}")
    assert wrong == [], "false positives: confirmed where the marker says it cannot fail"
    assert missed == [], "marked bugs the engine did not confirm"
