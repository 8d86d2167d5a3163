"""What a project wants checked and believed, applied by the one service (`service.py`) for the CLI and the server.

Before the engine: findings switched off by `select`/`ignore`/`per-file-ignores`, by a
`# grist: ignore` comment, or accepted in the baseline are dropped, so no search time is
spent on them. After the engine: a confirmation whose witness needs inputs further from
the program's own than `max-input-scale` allows goes back to `possible`, saying why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from grist_lsp.baseline import Baseline, read_baseline
from grist_lsp.config import GristConfig
from grist_lsp.model import Status, Verdict, Witness
from grist_lsp.suppressions import RuleSelection, Suppression, relative_to_root, silence


def _factor(scale: float) -> str:
    return f"{scale:.2g}" if scale < 10 else f"{scale:,.0f}"


def input_scale_words(witness: Witness) -> str:
    """How far the witness's inputs went from the program's own, in words ("" when unknown)."""
    scale = witness.beyond_examples
    if scale is None:
        return ""
    if scale <= 1:
        return "inputs within the range the program used"
    return f"inputs up to {_factor(scale)}x the range the program used"


@dataclass
class Prepared:
    """One file's verdicts as the engine should see them, and what was left out."""

    verdicts: list[Verdict]
    suppressed: int = 0  # by a comment or the rule selection
    baselined: int = 0
    unused: list[Suppression] = field(default_factory=list)


@dataclass(frozen=True)
class Policy:
    """A project's suppressions, baseline and `max-input-scale`, decided once per run (or per file in the server)."""

    root: Path  # baseline and per-file-ignores paths are relative to it
    rules: RuleSelection = RuleSelection()
    baseline: Baseline | None = None
    max_input_scale: float | None = None

    def before_engine(self, path: str, text: str | None, verdicts: list[Verdict]) -> Prepared:
        relative = relative_to_root(path, self.root)
        silenced = silence(verdicts, text, relative, self.rules)
        kept, baselined = silenced.kept, 0
        if self.baseline is not None:
            kept, baselined = self.baseline.leave_out(kept, self.root)
        return Prepared(
            verdicts=kept,
            suppressed=silenced.by_comment + silenced.by_rule,
            baselined=baselined,
            unused=silenced.unused,
        )

    def after_engine(self, verdicts: list[Verdict]) -> list[Verdict]:
        """``verdicts`` with confirmations beyond `max-input-scale` turned back to `possible`."""
        if self.max_input_scale is None:
            return verdicts
        return [self._within_scale(v) for v in verdicts]

    def _within_scale(self, verdict: Verdict) -> Verdict:
        witness = verdict.witness
        limit = self.max_input_scale
        if (
            verdict.status is not Status.CONFIRMED
            or witness is None
            or witness.beyond_examples is None
            or limit is None
            or witness.beyond_examples <= limit
        ):
            return verdict
        why = (
            f"a witness was found but needs inputs {_factor(witness.beyond_examples)}x the program's own "
            f"range, beyond max-input-scale {_factor(limit)}"
        )
        evidence = verdict.message or verdict.reason
        reason = f"{why} ({evidence})" if evidence else why
        return dataclasses.replace(verdict, status=Status.POSSIBLE, witness=None, message="", reason=reason)


def make_policy(
    config: GristConfig,
    root: Path,
    *,
    baseline: str | None = None,
    use_baseline: bool = True,
    max_input_scale: float | None = None,
) -> Policy:
    """The policy of ``config`` with command-line values (``baseline``, ``max_input_scale``) winning.

    A baseline given here is relative to the cwd, one from the config to the config's folder.
    ``use_baseline=False`` ignores both (writing a new baseline must see every finding).
    Raises ConfigError for a baseline file that is missing or malformed.
    """
    loaded: Baseline | None = None
    if use_baseline:
        if baseline is not None:
            loaded = read_baseline(Path(baseline).resolve(), f"--baseline {baseline}")
        elif config.baseline is not None:
            where = f"{config.source or 'pyproject.toml'}: [tool.grist] `baseline`"
            loaded = read_baseline((config.root / config.baseline).resolve(), where)
    rules = RuleSelection(
        select=frozenset(config.select) if config.select is not None else None,
        ignore=frozenset(config.ignore),
        per_file_ignores=tuple(
            (pattern, frozenset(codes)) for pattern, codes in config.per_file_ignores.items()
        ),
    )
    scale = max_input_scale if max_input_scale is not None else config.max_input_scale
    return Policy(root=root, rules=rules, baseline=loaded, max_input_scale=scale)
