"""Replay one witness: re-run its entry with its inputs and say whether the site fails again.

``replay(site, witness, text=None)`` runs in the *current* process (call it in
a fresh subprocess: the engine does, through ``python -m
grist_lsp.dynamic.replay``, and reproducer files do by being run by pytest).
Importing this module has no side effects; a call adds the program's
directories to ``sys.path`` and temporarily installs an import hook so the
target module runs from ``text``.

The site is matched by position and kind when ``text`` still holds the site's
source at its span, else by start line and kind, so that a fixed line
(``torch.log(x.clamp_min(1e-8))``) still counts as the same site.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from grist_lsp.model import Site, Witness
from grist_lsp.notebooks import program_text

from . import protocol
from .protocol import Done, ReplayAnswer

# Training steps a replay runs past the step at which the witness's run reached its site. The
# original text reaches it at that very step; slack covers a fix that moves the op by a step.
REPLAY_STEPS_PAST_SITE = 3


@dataclass
class ReplayResult:
    reproduced: bool  # finite operands -> non-finite output (or local gradient) at the site again
    result: str  # "nan" / "inf" / "-inf" / "finite" / "not-reached"
    detail: str  # in words
    upstream: bool = False  # an operand was already non-finite at the site (the program fails earlier)
    raised: str | None = None  # what stopped the program before the site ("NameError: x"), if anything


def _site_text_unchanged(site: Site, text: str) -> bool:
    lines = text.splitlines()
    sp = site.span
    if not (1 <= sp.start_line <= sp.end_line <= len(lines)):
        return False
    if sp.start_line == sp.end_line:
        return lines[sp.start_line - 1][sp.start_col : sp.end_col] == site.text
    chunk = (
        [lines[sp.start_line - 1][sp.start_col :]]
        + lines[sp.start_line : sp.end_line - 1]
        + [lines[sp.end_line - 1][: sp.end_col]]
    )
    return "\n".join(chunk) == site.text


def replay(site: Site, witness: Witness, text: str | None = None) -> ReplayResult:
    """Re-run ``witness`` against ``text`` (default: the file on disk) and judge ``site``."""
    import torch

    from . import entries as E
    from .absent_torchvision import stand_in_for_absent_packages
    from .witness import from_value

    stand_in_for_absent_packages()  # a replay reproducer's pytest process calls this directly
    if text is None:
        text = program_text(site.file)
    target = os.path.abspath(site.file)
    try:
        inputs = {k: from_value(tv) for k, tv in witness.inputs.items()}
        deltas = {k: from_value(tv) for k, tv in (witness.weight_deltas or {}).items()}
        weights = {k: from_value(tv) for k, tv in (witness.weight_values or {}).items()}
    except (OSError, ValueError, RuntimeError) as e:
        return ReplayResult(
            False,
            "not-reached",
            f"the witness values cannot be loaded: {e}",
            raised=f"{type(e).__name__}: {e}",
        )
    threads = torch.get_num_threads()
    # Drops what this replay imported on the way out, so the next one sees fresh text.
    with E.program_imports(target, text):
        torch.set_num_threads(1)
        prog = E.program_from_label(witness.entry, site.file, text, witness.seed, inputs, witness.argv)
        try:
            prog.produce_only(prog.setup)
        except BaseException as e:  # the program cannot even be set up any more
            return ReplayResult(
                False,
                "not-reached",
                f"{witness.entry} cannot be set up: {type(e).__name__}: {e}",
                raised=f"{type(e).__name__}: {e}",
            )
        cfg = prog.tracer_config(
            sites=[site],
            target=site,
            subs=inputs,
            weight_subs=deltas,
            weight_values=weights,
            loose_match=not _site_text_unchanged(site, text),
            stop_after_steps=witness.at_step + REPLAY_STEPS_PAST_SITE,
            target_step=witness.target_step,
            # Judged by the oracle that found it: a gradient witness by the op's own gradient.
            judge_gradients=witness.phase == "backward",
        )
        try:
            tracer, outcome, error = prog.run(cfg)
        finally:
            torch.set_num_threads(threads)
    if outcome is None:
        why = f" (the program raised {type(error).__name__}: {error})" if error is not None else ""
        return ReplayResult(
            False,
            "not-reached",
            f"{site.op} at line {site.span.start_line} was not evaluated{why}",
            raised=f"{type(error).__name__}: {error}" if error is not None else None,
        )
    if outcome.result == "upstream":
        return ReplayResult(
            False,
            "finite",
            "an operand was already NaN/INF when it reached the site (upstream)",
            upstream=True,
        )
    if outcome.found:
        where = " in the backward pass" if outcome.phase == "backward" else ""
        from grist_lsp.analyzer.catalogue import KINDS

        kind = KINDS.get(site.kind)
        # Masked scores hold -inf on purpose (softmax, masked sums): only their NaN output is the bug.
        operands = (
            "operands with the program's own infinities"
            if kind and kind.region.inf_operands
            else "finite operands"
        )
        verb = "raised" if outcome.raised is not None else "produced"
        return ReplayResult(True, outcome.result, f"{site.op} {verb} {outcome.result}{where} from {operands}")
    return ReplayResult(False, "finite", f"{site.op} produced finite values with the witness inputs")


def _warm_up(text: str) -> None:
    """Pay torch's lazy first-use costs while the workers are still searching.

    The first optimizer a process builds imports torch's compiler stack (about 0.7 s here);
    a training script replayed for its witness would pay that after the search, on the
    user's time, so this idle process pays it up front when the program names an optimizer.
    """
    if "optim" not in text:
        return
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def main() -> int:
    """Replays for the engine, as they come: JSON lines on stdin (a ``file`` line with the text,
    then a ``witness`` line per witness); results as JSON lines on ``GRIST_RESULT_FD``."""
    from grist_lsp.model import site_from_json, witness_from_json

    from .absent_torchvision import stand_in_for_absent_packages
    from .executors.child import open_child_channel
    from .lazy_dynamo import skip_dynamo_import

    stand_in_for_absent_packages()
    result = open_child_channel()
    text = None
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if msg.get("type") == "file":
            text = msg.get("text")
            skip_dynamo_import([text or ""])
            _warm_up(text or "")
            continue
        site = site_from_json(msg["site"])
        witness = witness_from_json(msg["witness"])
        try:
            r = replay(site, witness, text)
        except Exception as e:  # report, keep going with the other witnesses
            r = ReplayResult(False, "not-reached", f"replay failed: {type(e).__name__}: {e}")
        result.write(protocol.line(ReplayAnswer(site.key, r.reproduced, r.detail, r.result)))
        result.flush()
    result.write(protocol.line(Done()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
