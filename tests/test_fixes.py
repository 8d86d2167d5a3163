"""Fix proposals for every unsafe-op kind: the rewritten text, and that it removes the bug.

The corpus (tests/corpus/fixes/kinds.py) has one buggy function per kind and spelling. For each
site the real static pass reports there, the first proposed fix must be the expected idiomatic
rewrite, and the function's known-bad input (BAD_INPUTS) must give NaN/INF before the fix and
finite values after it. The functions run in a subprocess (run_cases.py), never in pytest's process.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.analyzer.catalogue import KINDS
from grist_lsp.analyzer.fixes import Fixer, propose_fixes
from grist_lsp.analyzer.parsing import parse
from grist_lsp.dynamic.verify import apply_edits
from grist_lsp.model import Status, Verdict

CORPUS = Path(__file__).parent / "corpus" / "fixes"
KINDS_FILE = CORPUS / "kinds.py"

# (function, op) -> (the rewritten line, the fix's title); the first fix proposed for that site.
EXPECTED = {
    ("log_plain", "torch.log"): (
        "return torch.log(x.clamp_min(1e-8))",
        "Clamp the operand of torch.log to >= 1e-8",
    ),
    ("log_method", "torch.Tensor.log"): (
        "return x.clamp_min(1e-8).log()",
        "Clamp the operand of Tensor.log to >= 1e-8",
    ),
    ("log_inplace", "torch.Tensor.log_"): (
        "y.clamp_min_(1e-8).log_()",
        "Clamp the operand of Tensor.log_ to >= 1e-8",
    ),
    ("log_of_softmax", "torch.log"): ("return F.log_softmax(x, dim=-1)", "Use log_softmax"),
    ("log_of_sigmoid", "torch.log"): ("return F.logsigmoid(x)", "Use F.logsigmoid"),
    ("log_of_sum_exp", "torch.log"): ("return torch.logsumexp(x, dim=-1)", "Use logsumexp"),
    ("log_of_sum_exp", "torch.exp"): ("return torch.logsumexp(x, dim=-1)", "Use logsumexp"),
    ("log1p_method", "torch.Tensor.log1p"): (
        "return x.clamp_min(-1 + 1e-6).log1p()",
        "Clamp the operand of Tensor.log1p to >= -1 + 1e-6",
    ),
    ("sqrt_of_difference", "torch.sqrt"): (
        "return torch.sqrt((x - y).clamp_min(1e-8))",
        "Clamp the operand of torch.sqrt to >= 1e-8",
    ),
    ("rsqrt_plain", "torch.rsqrt"): (
        "return torch.rsqrt(x.clamp_min(1e-8))",
        "Clamp the operand of torch.rsqrt to >= 1e-8",
    ),
    ("div_signed", "torch.Tensor.__truediv__"): (
        "return a / torch.where(b < 0, b.clamp_max(-1e-8), b.clamp_min(1e-8))",
        "Keep the divisor of / at least 1e-8 away from 0 (sign kept)",
    ),
    ("div_by_norm", "torch.Tensor.__truediv__"): (
        "return a / b.abs().sum().clamp_min(1e-8)",
        "Clamp the divisor of / to >= 1e-8",
    ),
    ("div_augmented", "torch.Tensor.__itruediv__"): (
        "a /= torch.where(b < 0, b.clamp_max(-1e-8), b.clamp_min(1e-8))",
        "Keep the divisor of /= at least 1e-8 away from 0 (sign kept)",
    ),
    ("div_reflected", "torch.Tensor.__rtruediv__"): (
        "return 1 / torch.where(x < 0, x.clamp_max(-1e-8), x.clamp_min(1e-8))",
        "Keep the divisor of / at least 1e-8 away from 0 (sign kept)",
    ),
    ("reciprocal_method", "torch.Tensor.reciprocal"): (
        "return torch.where(x < 0, x.clamp_max(-1e-8), x.clamp_min(1e-8)).reciprocal()",
        "Keep the operand of Tensor.reciprocal at least 1e-8 away from 0 (sign kept)",
    ),
    ("exp_plain", "torch.exp"): (
        "return torch.exp(x.clamp_max(88.7))",
        "Clamp the operand of torch.exp to <= 88.7 (above it the result overflows to inf)",
    ),
    ("exp_manual_softmax", "torch.exp"): ("return torch.softmax(x, dim=-1)", "Use softmax"),
    ("exp_manual_softmax", "torch.Tensor.__truediv__"): ("return torch.softmax(x, dim=-1)", "Use softmax"),
    ("pow_fractional", "torch.Tensor.__pow__"): (
        "return x.clamp_min(1e-8) ** 0.5",
        "Clamp the operand of ** to >= 1e-8",
    ),
    ("pow_negative", "torch.Tensor.__pow__"): (
        "return torch.where(x < 0, x.clamp_max(-1e-8), x.clamp_min(1e-8)) ** -1",
        "Keep the base of ** at least 1e-8 away from 0 (sign kept)",
    ),
    ("pow_function", "torch.pow"): (
        "return torch.pow(x.clamp_min(1e-8), 1.5)",
        "Clamp the operand of torch.pow to >= 1e-8",
    ),
    ("acos_plain", "torch.acos"): (
        "return torch.acos(x.clamp(-1 + 1e-6, 1 - 1e-6))",
        "Clamp the operand of torch.acos to [-1 + 1e-6, 1 - 1e-6]",
    ),
    ("asin_method", "torch.Tensor.asin"): (
        "return x.clamp(-1 + 1e-6, 1 - 1e-6).asin()",
        "Clamp the operand of Tensor.asin to [-1 + 1e-6, 1 - 1e-6]",
    ),
    ("atanh_method", "torch.Tensor.atanh"): (
        "return x.clamp(-1 + 1e-6, 1 - 1e-6).atanh()",
        "Clamp the operand of Tensor.atanh to [-1 + 1e-6, 1 - 1e-6]",
    ),
    ("acosh_plain", "torch.acosh"): (
        "return torch.acosh(x.clamp_min(1.0))",
        "Clamp the operand of torch.acosh to >= 1",
    ),
    ("lgamma_plain", "torch.lgamma"): (
        "return torch.lgamma(x.clamp_min(1e-8))",
        "Clamp the operand of torch.lgamma to >= 1e-8 (away from the poles)",
    ),
    ("var_single", "torch.Tensor.var"): (
        "return x.var(correction=int(x.numel() > 1))",
        "Keep the unbiased estimate; correction=0 only for a single element",
    ),
    ("std_function", "torch.std"): (
        "return torch.std(x, dim=0, correction=int(x.size(0) > 1))",
        "Keep the unbiased estimate; correction=0 only for a single element",
    ),
    ("mean_of_selection", "torch.Tensor.mean"): (
        "return x[mask].sum() / max(x[mask].numel(), 1)",
        "Divide the sum by max(count, 1) (0 for an empty selection)",
    ),
    ("logit_plain", "torch.logit"): ("return torch.logit(x, eps=1e-6)", "Pass eps=1e-6 to torch.logit"),
    ("softmax_masked", "torch.softmax"): (
        'return torch.softmax(scores.masked_fill(~keep, float("-inf")).clamp_min(-3.4028234663852886e38), dim=-1)',
        "Clamp the operand of torch.softmax to >= -3.4028234663852886e38 (mask with the lowest finite value, not -inf)",
    ),
    ("masked_entropy", "torch.nn.functional.log_softmax"): (
        'logp = F.log_softmax(scores.masked_fill(~keep, float("-inf")).clamp_min(-3.4028234663852886e38), dim=-1)',
        "Clamp the operand of torch.nn.functional.log_softmax to >= -3.4028234663852886e38 (mask with the lowest finite value, not -inf)",
    ),
    ("logdet_plain", "torch.logdet"): (
        "return torch.logdet(a + 1e-5 * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device))",
        "Add 1e-5 to the diagonal of the matrix of torch.logdet (a positive semi-definite matrix becomes positive definite)",
    ),
    ("cholesky_plain", "torch.linalg.cholesky"): (
        "return torch.linalg.cholesky(a + 1e-5 * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device))",
        "Add 1e-5 to the diagonal of the matrix of torch.linalg.cholesky (a positive semi-definite matrix becomes positive definite)",
    ),
    ("inverse_plain", "torch.linalg.inv"): (
        "return torch.linalg.inv(a + 1e-5 * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device))",
        "Add 1e-5 to the diagonal of the matrix of torch.linalg.inv (a singular covariance, kernel or normal matrix becomes invertible)",
    ),
    ("eigenvector_gradient", "torch.linalg.eigh"): (
        "_, vectors = torch.linalg.eigh(a + 1e-5 * torch.diag(torch.arange(a.shape[-1], dtype=a.dtype, device=a.device)))",
        "Break ties in the spectrum of the matrix of torch.linalg.eigh: add 1e-5 * diag(0, 1, ..., n-1) (the vectors of a near tie are then set by it, and their gradient can reach 1/1e-5)",
    ),
    ("masked_entropy", "torch.Tensor.__mul__"): (
        "return -(logp.exp() * torch.nan_to_num(logp, nan=torch.nan)).sum(-1)",
        "Keep the infinities of logp out of *: torch.nan_to_num",
    ),
}


def _bad_inputs() -> dict[str, tuple]:
    tree = parse(KINDS_FILE.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "BAD_INPUTS":
            return ast.literal_eval(node.value)
    raise AssertionError("kinds.py has no BAD_INPUTS")


@pytest.fixture(scope="module")
def corpus() -> tuple[str, list[Verdict]]:
    text = KINDS_FILE.read_text()
    return text, analyze_source(str(KINDS_FILE), text)


@pytest.fixture(scope="module")
def first_fixes(corpus: tuple[str, list[Verdict]]) -> dict[tuple[str, str], tuple[Verdict, str]]:
    """(function, op) -> (verdict, fixed text) for each site's first proposed fix."""
    text, verdicts = corpus
    out = {}
    for verdict in verdicts:
        if verdict.status is not Status.POSSIBLE:
            continue
        fixes = propose_fixes(text, verdict)
        assert fixes, (
            f"no fix for {verdict.site.text} ({verdict.site.op}) at line {verdict.site.span.start_line}"
        )
        assert all(not f.verified for f in fixes), "propose_fixes must not claim verification"
        out.setdefault(
            (verdict.site.function, verdict.site.op), (verdict, apply_edits(text, fixes[0].edits), fixes[0])
        )
    return out


def test_one_fixer_for_a_file_proposes_what_each_site_alone_gets(corpus: tuple[str, list[Verdict]]) -> None:
    # The check proposes every site's fixes from one parse and index of the file: sharing them
    # must not change a single edit.
    text, verdicts = corpus
    fixer = Fixer(text)
    first_of_kind = {v.site.kind: v for v in reversed(verdicts) if v.status is Status.POSSIBLE}
    assert len(first_of_kind) > 15
    for verdict in first_of_kind.values():
        assert fixer.propose(verdict) == propose_fixes(text, verdict), verdict.site.text


# kinds.py is a float32 file (a float16 op anywhere would make the whole file's eps float16's):
# the float16-only kind's fixes are checked on tests/corpus/precision by tests/test_precision.py.
FLOAT16_ONLY = {"overflow"}


def test_every_kind_has_a_corpus_site_with_a_fix(first_fixes: dict) -> None:
    kinds = {verdict.site.kind for verdict, _, _ in first_fixes.values()}
    missing = set(KINDS) - FLOAT16_ONLY - kinds
    assert kinds <= set(KINDS) - FLOAT16_ONLY and not missing, (
        f"kinds without a fixed corpus site: {sorted(missing)}"
    )


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0]}-{k[1]}")
def test_fix_text(first_fixes: dict, key: tuple[str, str]) -> None:
    assert key in first_fixes, f"the static pass reported no {key[1]} site in {key[0]}"
    verdict, fixed, fix = first_fixes[key]
    line = fixed.splitlines()[verdict.site.span.start_line - 1].strip()
    expected_line, expected_title = EXPECTED[key]
    assert line == expected_line
    assert fix.title == expected_title
    # minimal: the fix edits only the site's own span
    assert [e.span for e in fix.edits] == [verdict.site.span] or fix.title.startswith("Use")


def test_every_corpus_site_is_in_the_table(first_fixes: dict) -> None:
    assert set(first_fixes) == set(EXPECTED)


def test_fixes_remove_the_bug_on_the_bad_input(first_fixes: dict) -> None:
    """The known-bad input gives NaN/INF before each fix and finite values after it."""
    bad = _bad_inputs()
    text = KINDS_FILE.read_text()
    cases, keys = [], []
    for key, (_verdict, fixed, _) in sorted(first_fixes.items()):
        function = key[0]
        for label, source in (("before", text), ("after", fixed)):
            cases.append({"source": source, "function": function, "args": list(bad[function])})
            keys.append((key, label))
    proc = subprocess.run(
        [sys.executable, str(CORPUS / "run_cases.py")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = dict(zip(keys, json.loads(proc.stdout)))
    for key in sorted(first_fixes):
        before, after = results[(key, "before")], results[(key, "after")]
        # A kind that fails by raising (cholesky) shows its bug as that error, not as NaN/INF.
        raised = KINDS[first_fixes[key][0].site.kind].region.raises and "LinAlgError" in before.get(
            "error", ""
        )
        assert before["finite"] is False or raised, (
            f"{key}: the bad input should give NaN/INF before the fix: {before}"
        )
        assert after["finite"] is True, f"{key}: still not finite after the fix: {after}"


def test_fixed_sites_are_no_longer_possible_where_the_static_pass_can_tell(first_fixes: dict) -> None:
    """After the fix the static pass either finds no such op at the site or proves it safe,
    for the rewrites its range facts cover (clamp_min, log_softmax, logsumexp, correction=0 ...)."""
    statically_settled = {
        "log_plain",
        "log_method",
        "log_of_softmax",
        "log_of_sigmoid",
        "log_of_sum_exp",
        "sqrt_of_difference",
        "rsqrt_plain",
        "exp_manual_softmax",
        "pow_fractional",
        "pow_function",
    }
    # Every function named is checked (a renamed one would otherwise be skipped without a word).
    assert statically_settled <= {function for function, _op in first_fixes}
    for (function, _op), (verdict, fixed, _) in first_fixes.items():
        if function not in statically_settled:
            continue
        after = analyze_source(str(KINDS_FILE), fixed)
        line = verdict.site.span.start_line
        still = [
            v
            for v in after
            if v.site.span.start_line == line
            and v.site.kind == verdict.site.kind
            and v.status is Status.POSSIBLE
        ]
        assert not still, (
            f"{function}: {still[0].site.text} is still possible after the fix: {still[0].reason}"
        )


def test_a_divisor_the_static_pass_proves_nonnegative_is_clamped_from_below() -> None:
    """The range reaches the fix as data (Verdict.operand_range), not parsed back from words."""
    text = "import torch\n\n\ndef share(x, z):\n    d = x.abs().sum()\n    return z / d\n"
    [div] = [v for v in analyze_source("share.py", text) if v.site.kind == "div"]
    assert div.status is Status.POSSIBLE
    assert div.operand_range is not None and div.operand_range.nonnegative, div
    [first, *_] = propose_fixes(text, div)
    assert "return z / d.clamp_min(1e-8)" in apply_edits(text, first.edits), first
    # A sum that may be negative keeps its sign: the guard is not a plain clamp from below.
    signed = text.replace("x.abs().sum()", "x.sum()")
    [div] = [v for v in analyze_source("share.py", signed) if v.site.kind == "div"]
    assert div.operand_range is None or not div.operand_range.nonnegative
    assert "return z / d.clamp_min(1e-8)" not in apply_edits(signed, propose_fixes(signed, div)[0].edits)
