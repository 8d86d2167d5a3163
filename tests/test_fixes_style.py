"""Fixes keep the code's style: namespaces and aliases, imports only when needed, dtype-aware eps,
precedence, and ``apply_edits`` positions (code points, insertions, overlaps)."""

from __future__ import annotations

import pytest

from grist_lsp.analyzer.analysis import analyze_source
from grist_lsp.analyzer.fixes import eps_near_one, propose_fixes
from grist_lsp.dynamic.verify import EditError, apply_edits, edited_region
from grist_lsp.model import Span, Status, TensorValue, TextEdit, Verdict, Witness


def _fixed(text: str, site_text: str, index: int = 0, dtype: str | None = None) -> tuple[str, list]:
    """The text after the ``index``-th fix of the (real) static pass's site whose text is ``site_text``."""
    verdicts = [
        v for v in analyze_source("m.py", text) if v.status is Status.POSSIBLE and v.site.text == site_text
    ]
    assert verdicts, f"the static pass reports no site {site_text!r}"
    verdict = verdicts[0]
    if dtype is not None:
        verdict.witness = Witness(
            entry="entry:m.py:make",
            inputs={},
            weights_moved={},
            operand=TensorValue(shape=[1], dtype=dtype, values=[0.0]),
            result="-inf",
        )
    fixes = propose_fixes(text, verdict)
    return apply_edits(text, fixes[index].edits), fixes


def test_log_softmax_keeps_the_namespace_the_code_used() -> None:
    for call, expected in [
        ("torch.softmax(x, 1)", "torch.log_softmax(x, 1)"),
        ("F.softmax(x, dim=1)", "F.log_softmax(x, dim=1)"),
        ("torch.nn.functional.softmax(x, 1)", "torch.nn.functional.log_softmax(x, 1)"),
        ("x.softmax(1)", "x.log_softmax(1)"),
    ]:
        text = f"import torch\nimport torch.nn.functional as F\n\ndef f(x):\n    return torch.log({call})\n"
        fixed, _ = _fixed(text, f"torch.log({call})")
        assert fixed.splitlines()[4] == f"    return {expected}"


def test_logsigmoid_reuses_an_existing_functional_alias() -> None:
    text = "import torch\nfrom torch.nn import functional as nnf\n\ndef f(x):\n    return torch.log(torch.sigmoid(x))\n"
    fixed, fixes = _fixed(text, "torch.log(torch.sigmoid(x))")
    assert fixed == text.replace("torch.log(torch.sigmoid(x))", "nnf.logsigmoid(x)")
    assert len(fixes[0].edits) == 1  # no import added


def test_logsigmoid_adds_the_import_only_when_no_alias_exists() -> None:
    text = '"""Doc."""\n\nimport math\nimport torch as th\n\n\ndef f(x):\n    return th.log(x.sigmoid())\n'
    fixed, fixes = _fixed(text, "th.log(x.sigmoid())")
    assert fixed == (
        '"""Doc."""\n\nimport math\nimport torch as th\nimport torch.nn.functional as F\n\n\n'
        "def f(x):\n    return F.logsigmoid(x)\n"
    )
    compile(fixed, "m.py", "exec")


def test_import_goes_after_the_docstring_when_the_file_has_no_imports_at_top() -> None:
    text = '"""Doc."""\n\ndef f(x):\n    import torch\n    return torch.log(torch.sigmoid(x))\n'
    fixed, _ = _fixed(text, "torch.log(torch.sigmoid(x))")
    assert fixed.startswith('"""Doc."""\nimport torch.nn.functional as F\n')


def test_bare_imported_names_are_kept() -> None:
    text = "from torch import log, sqrt\n\ndef f(x):\n    return log(x) + sqrt(x)\n"
    fixed, _ = _fixed(text, "log(x)")
    assert "return log(x.clamp_min(1e-8)) + sqrt(x)" in fixed
    fixed, _ = _fixed(text, "sqrt(x)")
    assert "return log(x) + sqrt(x.clamp_min(1e-8))" in fixed


def test_eps_follows_the_operand_dtype() -> None:
    text = "import torch\n\ndef f(x):\n    return torch.log(x) * torch.acos(x)\n"
    assert "torch.log(x.clamp_min(1e-4))" in _fixed(text, "torch.log(x)", dtype="float16")[0]
    assert "torch.log(x.clamp_min(1e-12))" in _fixed(text, "torch.log(x)", dtype="torch.float64")[0]
    assert "torch.log(x.clamp_min(1e-8))" in _fixed(text, "torch.log(x)")[0]
    # next to +-1 the eps must survive rounding in the dtype: 1 - 1e-8 == 1.0 in float32
    assert "torch.acos(x.clamp(-1 + 1e-3, 1 - 1e-3))" in _fixed(text, "torch.acos(x)", dtype="float16")[0]
    import torch

    for name in ("float16", "bfloat16", "float32", "float64"):
        dtype = getattr(torch, name)
        assert torch.tensor(1 - eps_near_one(name), dtype=dtype) < 1
        assert torch.atanh(torch.tensor(1 - eps_near_one(name), dtype=dtype)).isfinite()


def test_exp_bound_follows_the_dtype() -> None:
    text = "import torch\n\ndef f(x):\n    return torch.exp(x)\n"
    import torch

    for dtype, bound in [("float16", "11.0"), ("float32", "88.7"), ("float64", "709.7")]:
        fixed = _fixed(text, "torch.exp(x)", dtype=dtype)[0]
        assert f"torch.exp(x.clamp_max({bound}))" in fixed
        assert torch.exp(torch.tensor(float(bound), dtype=getattr(torch, dtype))).isfinite()


def test_replacement_that_binds_looser_gets_parentheses() -> None:
    text = "import torch\n\ndef f(x, mask):\n    return x[mask].mean() ** 2\n"
    fixed, _ = _fixed(text, "x[mask].mean()")
    assert "return (x[mask].sum() / max(x[mask].numel(), 1)) ** 2" in fixed


def test_operand_that_binds_looser_gets_parentheses() -> None:
    text = "import torch\n\ndef f(a, b, c):\n    return torch.sqrt(a - b * c) / (a - b)\n"
    assert "torch.sqrt((a - b * c).clamp_min(1e-8))" in _fixed(text, "torch.sqrt(a - b * c)")[0]
    fixed = _fixed(text, "torch.sqrt(a - b * c) / (a - b)")[0]
    assert "/ (a - b).abs().clamp_min(1e-8).copysign(a - b)" in fixed  # evaluated once, sign kept


def test_older_unbiased_style_is_kept() -> None:
    text = "import torch\n\ndef f(x, y):\n    return x.std(unbiased=True) + y.var(0)\n"
    assert "x.std(unbiased=False)" in _fixed(text, "x.std(unbiased=True)")[0]
    # the file already speaks `unbiased=`, so the new keywords follow it
    assert "y.var(0, unbiased=bool(y.size(0) > 1))" in _fixed(text, "y.var(0)")[0]
    assert "y.var(0, unbiased=False)" in _fixed(text, "y.var(0)", index=1)[0]


def test_in_place_and_augmented_forms_stay_in_place() -> None:
    text = "import torch\n\ndef f(x):\n    x.sqrt_()\n    return x\n\n\ndef g(x: torch.Tensor):\n    x **= 0.5\n    return x\n"
    assert "    x.clamp_min_(1e-8).sqrt_()\n" in _fixed(text, "x.sqrt_()")[0]
    assert "    x.clamp_min_(1e-8).pow_(0.5)\n" in _fixed(text, "x **= 0.5")[0]


def test_multiline_site_is_replaced_exactly() -> None:
    text = "import torch\n\ndef f(x):\n    y = torch.log(\n        x\n    )  # keep me\n    return y\n"
    fixed, fixes = _fixed(text, "torch.log(\n        x\n    )")
    assert (
        fixed
        == "import torch\n\ndef f(x):\n    y = torch.log(\n        x.clamp_min(1e-8)\n    )  # keep me\n    return y\n"
    )


# --- apply_edits / edited_region ------------------------------------------------------------


def test_apply_edits_counts_code_points_and_keeps_insertion_order() -> None:
    text = "s = 'héllo'; y = a / b\n"
    col = text.index("a / b")
    edits = [
        TextEdit(Span(1, col, 1, col + 5), "a / c"),
        TextEdit(Span(1, 0, 1, 0), "# 1\n"),
        TextEdit(Span(1, 0, 1, 0), "# 2\n"),
    ]
    assert apply_edits(text, edits) == "# 1\n# 2\ns = 'héllo'; y = a / c\n"
    assert apply_edits("x\n", [TextEdit(Span(2, 0, 2, 0), "y\n")]) == "x\ny\n"


def test_apply_edits_refuses_overlaps_and_positions_outside_the_text() -> None:
    with pytest.raises(EditError):
        apply_edits("abcdef\n", [TextEdit(Span(1, 0, 1, 3), "x"), TextEdit(Span(1, 2, 1, 4), "y")])
    with pytest.raises(EditError):
        apply_edits("abc\n", [TextEdit(Span(5, 0, 5, 1), "x")])
    with pytest.raises(EditError):
        apply_edits("abc\n", [TextEdit(Span(1, 9, 1, 9), "x")])


def test_edited_region_follows_an_added_import() -> None:
    text = "import torch\n\ndef f(x):\n    return torch.log(torch.sigmoid(x))\n"
    verdict = [v for v in analyze_source("m.py", text) if v.status is Status.POSSIBLE][0]
    fix = propose_fixes(text, verdict)[0]
    fixed = apply_edits(text, fix.edits)
    region = edited_region(text, fix.edits, verdict.site.span)
    line = fixed.splitlines()[region.start_line - 1]
    assert line[region.start_col : region.end_col] == "F.logsigmoid(x)"


def test_no_fix_for_a_span_that_is_not_in_the_text() -> None:
    text = "import torch\n\ndef f(x):\n    return torch.log(x)\n"
    verdict = analyze_source("m.py", text)[0]
    moved = Verdict(
        site=verdict.site.__class__(**{**verdict.site.__dict__, "span": Span(9, 0, 9, 4)}),
        status=Status.POSSIBLE,
    )
    assert propose_fixes(text, moved) == []
    assert propose_fixes("def broken(:\n", verdict) == []


def test_var_offers_an_output_preserving_guard_too() -> None:
    text = "import torch\n\ndef f(x):\n    return torch.std(x, dim=0)\n"
    verdict = [v for v in analyze_source("m.py", text) if v.status is Status.POSSIBLE][0]
    titles_and_lines = [
        (f.title, apply_edits(text, f.edits).splitlines()[3].strip()) for f in propose_fixes(text, verdict)
    ]
    assert titles_and_lines == [
        (
            "Keep the unbiased estimate; correction=0 only for a single element",
            "return torch.std(x, dim=0, correction=int(x.size(0) > 1))",
        ),
        (
            "Use correction=0 (population variance: defined for one element)",
            "return torch.std(x, dim=0, correction=0)",
        ),
    ]


def test_log_of_one_minus_sigmoid_becomes_logsigmoid_of_the_negation() -> None:
    text = "import torch\nimport torch.nn.functional as F\n\ndef f(x, y):\n    return torch.log(1 - (x + y).sigmoid())\n"
    fixed, _ = _fixed(text, "torch.log(1 - (x + y).sigmoid())")
    assert fixed.splitlines()[4] == "    return F.logsigmoid(-(x + y))"


def test_bare_softmax_gets_log_softmax_from_the_same_module() -> None:
    text = "import torch\nfrom torch.nn.functional import softmax\n\ndef f(x):\n    return torch.log(softmax(x, 1))\n"
    fixed, _ = _fixed(text, "torch.log(softmax(x, 1))")
    assert fixed == (
        "import torch\nfrom torch.nn.functional import softmax\nfrom torch.nn.functional import log_softmax\n"
        "\ndef f(x):\n    return log_softmax(x, 1)\n"
    )


def test_an_F_that_is_not_functional_is_not_reused() -> None:
    text = "import torch\nF = 3\n\ndef f(x):\n    return torch.log(torch.sigmoid(x))\n"
    fixed, fixes = _fixed(text, "torch.log(torch.sigmoid(x))")
    assert "return torch.nn.functional.logsigmoid(x)" in fixed and len(fixes[0].edits) == 1


def test_inverse_edits_map_fixed_positions_back() -> None:
    from grist_lsp.dynamic.verify import inverse_edits, shift_span

    text = "import torch\nx = torch.log(a)\ny = b / c\n"
    edits = [
        TextEdit(Span(2, 0, 2, 0), "import foo\n"),
        TextEdit(Span(2, 4, 2, 16), "torch.log(a.clamp_min(1e-8))"),
    ]
    fixed = apply_edits(text, edits)
    back = inverse_edits(text, edits)
    assert apply_edits(fixed, back) == text
    assert shift_span(Span(4, 4, 4, 9), back, fixed) == Span(3, 4, 3, 9)  # `b / c` before the fix
    assert shift_span(Span(3, 4, 3, 32), back, fixed) is None  # inside the fix's own code


def test_log_of_a_softmax_variable_becomes_log_softmax_when_nothing_is_rebound() -> None:
    text = (
        "import torch\n\ndef ce(logits, onehot):\n    probs = torch.softmax(logits, dim=1)\n"
        "    return -(onehot * torch.log(probs)).sum(1).mean()\n"
    )
    fixed, fixes = _fixed(text, "torch.log(probs)")
    assert fixes[0].title == "Use log_softmax"
    assert fixed.splitlines()[4] == "    return -(onehot * torch.log_softmax(logits, dim=1)).sum(1).mean()"
    rebound = text.replace("    return", "    logits = logits * 2\n    return")
    fixes = propose_fixes(
        rebound, [v for v in analyze_source("m.py", rebound) if v.site.text == "torch.log(probs)"][0]
    )
    assert [f.title for f in fixes] == ["Clamp the operand of torch.log to >= 1e-8"]
