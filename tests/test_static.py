"""The static pass against its corpus, its span contract with CPython, and bad input.

Every program in tests/corpus/static states its sites on the site's first
line: ``# expect: torch.log@12 possible; torch.Tensor.__truediv__@8 safe``
(op, 0-based code-point start column, status). The test requires exactly
those sites: no missing one, no extra one.
"""

from __future__ import annotations

import dis
import re
import threading
import time
from pathlib import Path

import pytest

from grist_lsp.analyzer.analysis import MAX_FILE_BYTES, analyze_file, analyze_source
from grist_lsp.analyzer.catalogue import KINDS
from grist_lsp.analyzer.parsing import parse
from grist_lsp.analyzer.positions import SourceLines
from grist_lsp.model import Span, Status

CORPUS = Path(__file__).parent / "corpus" / "static"
PROGRAMS = sorted(CORPUS.glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*(.*)$")
ITEM = re.compile(r"^(?P<op>[\w.]+)@(?P<col>\d+)\s+(?P<status>safe|possible)$")


def expectations(path: Path) -> set[tuple[int, int, str, str]]:
    out = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        m = EXPECT.search(line)
        if not m:
            continue
        for item in m.group(1).split(";"):
            parsed = ITEM.match(item.strip())
            assert parsed, f"{path.name}:{lineno}: malformed expectation {item!r}; write op@col status"
            out.add((lineno, int(parsed["col"]), parsed["op"], parsed["status"]))
    return out


def test_corpus_is_large_and_covers_every_kind():
    assert len(PROGRAMS) >= 40
    seen: dict[str, set[str]] = {}
    for p in PROGRAMS:
        for v in analyze_file(str(p)):
            seen.setdefault(v.site.kind, set()).add(v.status.value)
    for kind in KINDS:
        assert kind in seen, f"no corpus program has a {kind} site"
    # every value-decided kind has both a proved-safe and a possible twin (a matrix kind is
    # decided by a spectrum, which entry ranges never prove)
    for kind, k in KINDS.items():
        if k.region.shape is None and k.region.matrix is None:
            assert seen[kind] == {"safe", "possible"}, (kind, seen[kind])


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_corpus_program(path: Path):
    expected = expectations(path)
    verdicts = analyze_file(str(path))
    actual = {(v.site.span.start_line, v.site.span.start_col, v.site.op, v.status.value) for v in verdicts}
    assert actual == expected, (
        f"missing: {sorted(expected - actual)}\nunexpected: {sorted(actual - expected)}"
    )
    assert len(verdicts) == len(actual), "two verdicts for one site"
    for v in verdicts:
        assert v.reason and v.message and v.site.op in v.message
        assert v.site.kind in KINDS and v.site.operand
        assert v.site.file == str(path)


def _instruction_spans(code, lines: SourceLines) -> set[Span]:
    spans = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("CALL", "BINARY_OP", "CALL_KW", "CALL_FUNCTION_EX") and ins.positions.lineno:
            p = ins.positions
            spans.add(
                Span(
                    p.lineno,
                    lines.col(p.lineno, p.col_offset),
                    p.end_lineno,
                    lines.col(p.end_lineno, p.end_col_offset),
                )
            )
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            spans |= _instruction_spans(const, lines)
    return spans


@pytest.mark.parametrize("path", [p for p in PROGRAMS if expectations(p)], ids=lambda p: p.name)
def test_site_spans_are_cpython_instruction_positions(path: Path):
    """The tracer matches runtime events by co_positions: every span must be one. Only programs
    whose markers expect sites are cases (a program with none would check nothing)."""
    text = path.read_text(encoding="utf-8")
    lines = SourceLines(text)
    spans = _instruction_spans(compile(text, str(path), "exec"), lines)
    verdicts = analyze_file(str(path))
    assert verdicts, f"{path.name}: its markers expect sites, the analysis found none"
    for v in verdicts:
        assert v.site.span in spans, (
            f"{path.name}: {v.site.op} span {v.site.span} is no CALL/BINARY_OP position"
        )
        assert v.site.text == lines.text_of(v.site.span)


def test_exact_spans_and_function_names():
    src = (
        "import torch\n"
        "class VAE(torch.nn.Module):\n"
        "    def forward(self, x, y):\n"
        "        a = (x / y)\n"
        "        x /= y\n"
        "        b = (x - y).sqrt()\n"
        "        return torch.log(\n"
        "            x)\n"
        "z = 1 / torch.rand(2)\n"
    )
    got = {v.site.op: v.site for v in analyze_source("m.py", src)}
    assert got["torch.Tensor.__truediv__"].span == Span(4, 13, 4, 18)  # parentheses excluded
    assert got["torch.Tensor.__truediv__"].text == "x / y"
    assert got["torch.Tensor.__itruediv__"].span == Span(5, 8, 5, 14)  # the whole statement
    assert got["torch.Tensor.sqrt"].span == Span(6, 12, 6, 26)
    assert got["torch.log"].span == Span(7, 15, 8, 14)
    assert got["torch.log"].function == "VAE.forward"
    assert got["torch.Tensor.__rtruediv__"].function is None
    assert got["torch.Tensor.__rtruediv__"].operand == "other"


def test_unicode_columns_are_code_points():
    src = "import torch\ns = 'ééé'; y = torch.log(torch.rand(2))\n"
    (v,) = analyze_source("u.py", src)
    assert v.site.span.start_col == src.split("\n")[1].index("torch.log")


def test_syntax_error_gives_one_error_verdict_with_its_line():
    src = "import torch\n\ndef f(x):\n    return torch.log(x\n\nprint(1)\n"
    (v,) = analyze_source("bad.py", src)
    assert v.status is Status.ERROR
    assert "syntax error" in v.message and "bad.py" in v.message
    assert v.site.span.start_line in (4, 6)


def test_syntax_error_line_is_exact():
    (v,) = analyze_source("bad.py", "x = 1\ny = = 2\n")
    assert v.status is Status.ERROR and v.site.span.start_line == 2


def test_empty_and_whitespace_files_have_no_verdicts(tmp_path: Path):
    (tmp_path / "e.py").write_bytes(b"")
    (tmp_path / "w.py").write_bytes(b"\n  \n")
    assert analyze_file(str(tmp_path / "e.py")) == []
    assert analyze_file(str(tmp_path / "w.py")) == []
    assert analyze_source("e.py", "") == []


def test_binary_file_is_an_error(tmp_path: Path):
    p = tmp_path / "b.py"
    p.write_bytes(b"import torch\n\x00\x01\x02\xff")
    (v,) = analyze_file(str(p))
    assert v.status is Status.ERROR and "binary" in v.message and v.site.span.start_line == 2


def test_non_utf8_without_cookie_is_an_error(tmp_path: Path):
    p = tmp_path / "l.py"
    p.write_bytes("import torch\n# caf\xe9\n".encode("latin-1"))
    (v,) = analyze_file(str(p))
    assert v.status is Status.ERROR and "decode" in v.message and "l.py" in v.message


def test_coding_cookie_is_respected(tmp_path: Path):
    p = tmp_path / "c.py"
    p.write_bytes(
        "# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'; y = torch.log(torch.rand(2))\n".encode(
            "latin-1"
        )
    )
    (v,) = analyze_file(str(p))
    assert v.site.op == "torch.log" and v.status is Status.POSSIBLE
    assert v.site.span.start_col == len("s = 'café'; y = ")


def test_missing_file_is_an_error(tmp_path: Path):
    (v,) = analyze_file(str(tmp_path / "nope.py"))
    assert v.status is Status.ERROR and "cannot read" in v.message


def test_oversized_file_is_an_error(tmp_path: Path):
    p = tmp_path / "huge.py"
    with open(p, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no real disk use
    (v,) = analyze_file(str(p))
    assert v.status is Status.ERROR and "limit" in v.message


def test_deep_nesting_does_not_raise():
    src = "import torch\ny = " + "(" * 5000 + "torch.log(x)" + ")" * 5000 + "\n"
    out = analyze_source("deep.py", src)
    assert len(out) == 1 and out[0].status in (Status.ERROR, Status.POSSIBLE)


def test_parsing_on_many_threads_while_finalizers_run_never_fails():
    # CPython 3.11 counts the tree builder's depth per interpreter: a finalizer run by the
    # collector mid-parse lets another thread parse, and the first parse then raised
    # "SystemError: AST constructor recursion depth mismatch" (the CLI parses files on threads).
    source = "def f(x):\n    return g(h(x) + [1, 2, (3, 4)])\n" * 200
    failures: list[BaseException] = []

    class Finalized:
        def __del__(self) -> None:
            time.sleep(0)  # Python code inside the collector: a chance for another thread to run

    def parse_many() -> None:
        for _ in range(100):
            for _ in range(20):
                cycle = Finalized()
                cycle.me = cycle  # pyright: ignore[reportAttributeAccessIssue]
            try:
                parse(source)
            except SystemError as e:
                failures.append(e)

    threads = [threading.Thread(target=parse_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_long_assignment_chain_does_not_raise():
    body = "x = torch.rand(3) + 1\n" + "x = x + 1\n" * 3000 + "y = torch.log(x)\n"
    out = analyze_source("chain.py", "import torch\n" + body)
    assert [v.site.op for v in out] == ["torch.log"]
    assert out[0].status in (Status.SAFE, Status.POSSIBLE)


def test_fifty_thousand_line_file(tmp_path: Path):
    block = (
        "def f{i}(x, p):\n"
        "    a = torch.log(p)\n"
        "    b = x / (x.norm() + 1e-8)\n"
        "    c = torch.sqrt(x - p)\n"
        "    return a + b + c\n"
        "\n"
    )
    n_blocks = 50_000 // 6 + 1
    text = "import torch\n" + "".join(block.format(i=i) for i in range(n_blocks))
    assert text.count("\n") >= 50_000
    p = tmp_path / "big.py"
    p.write_text(text, encoding="utf-8")
    out = analyze_file(str(p))
    assert len(out) == 3 * n_blocks
    assert [v.status for v in out[:3]] == [Status.POSSIBLE, Status.SAFE, Status.POSSIBLE]
    assert out[-1].site.span.start_line == text.count("\n") - 2


def test_in_place_updates_in_loops_terminate():
    """Optimizer-style code: in-place chains redefine names inside a loop (once recursed forever)."""
    src = (
        "import torch\n"
        "def step(params, grads, exp_avgs, exp_avg_sqs, lr, eps=1e-8):\n"
        "    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):\n"
        "        m.mul_(0.9).add_(g, alpha=0.1)\n"
        "        v.mul_(0.999).addcmul_(g, g, value=0.001)\n"
        "        denom = v.sqrt().add_(eps)\n"
        "        p.addcdiv_(m, denom, value=-lr)\n"
        "        v.clamp_(min=eps)\n"
        "        q = torch.log(v)\n"
    )
    out = analyze_source("adam.py", src)
    assert [(v.site.op, v.status) for v in out] == [
        ("torch.Tensor.sqrt", Status.POSSIBLE),
        ("torch.log", Status.SAFE),
    ]


def test_real_world_sources_never_raise():
    """torch's own distributions, optimizers and functional API: a verdict list, never a traceback."""
    import torch

    root = Path(torch.__file__).parent
    files = sorted((root / "distributions").glob("*.py")) + sorted((root / "optim").glob("*.py"))
    files.append(root / "nn" / "functional.py")
    sites = 0
    for f in files:
        out = analyze_file(str(f))
        assert all(v.status in (Status.SAFE, Status.POSSIBLE) for v in out), (f, [v.message for v in out][:3])
        lines = SourceLines(f.read_text(encoding="utf-8"))
        for v in out:
            assert v.site.text == lines.text_of(v.site.span) and v.reason
        sites += len(out)
    assert sites > 500


def test_long_operator_chain_gives_sites_not_an_error():
    src = "import torch\nx = torch.rand(3)\ny = " + " / ".join(["x"] * 900) + "\n"
    out = analyze_source("chain.py", src)
    assert len(out) == 899 and {v.status for v in out} == {Status.POSSIBLE}


def test_an_internal_failure_is_an_error_verdict_not_a_traceback(monkeypatch):
    import grist_lsp.analyzer.analysis as analysis

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(analysis, "find_sites", broken)
    (v,) = analysis.analyze_source("m.py", "import torch\ny = torch.log(x)\n")
    assert v.status is Status.ERROR and "internal error" in v.message and "KeyError" in v.message
    assert "m.py" in v.message and "test_static.py:" in v.message  # where it failed


def test_file_dtype_choice():
    from grist_lsp.analyzer.analysis import file_dtype

    assert file_dtype("x = 1\n") == "float32"
    assert file_dtype("y = x.half()\n") == "float16"
    assert file_dtype("with torch.autocast('cuda'):\n    pass\n") == "float16"
    assert file_dtype("y = x.to(torch.bfloat16)\n") == "bfloat16"
    assert file_dtype("torch.set_default_dtype(torch.float64)\n") == "float64"
    assert file_dtype("torch.set_default_dtype(torch.float64)\ny = x.float()\n") == "float32"
    assert file_dtype("# half of the batch\n") == "float32"
