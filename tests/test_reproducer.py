"""Reproducers are real pytest files: they fail while the bug is there, pass once it is fixed, and
error (never pass) once the program raises, does not parse or no longer reaches the site.

Every reproducer here is written to disk and run with ``python -m pytest`` in a subprocess, once
against the buggy program and once after changing it (the proposed fix, a wrong fix, or a
breakage); programs are copied into tmp_path first, so the corpus stays buggy.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))

import corpus_markers as cm  # noqa: E402

from grist_lsp.analyzer.analysis import analyze_source  # noqa: E402
from grist_lsp.analyzer.fixes import propose_fixes  # noqa: E402
from grist_lsp.dynamic.reproducer import render_reproducer, write_reproducer  # noqa: E402
from grist_lsp.dynamic.verify import apply_edits  # noqa: E402
from grist_lsp.model import Site, Status, TensorValue, Verdict, Witness  # noqa: E402

CORPUS = Path(__file__).parent / "corpus" / "fixes"


def _copy(name: str, directory: Path, as_name: str | None = None) -> Path:
    """A copy of a corpus program under its own module name (one pytest process imports them all)."""
    target = directory / (as_name or name)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(CORPUS / name, target)
    return target


def _site(path: Path, text: str) -> Site:
    verdicts = [v for v in analyze_source(str(path), path.read_text()) if v.site.text == text]
    assert verdicts, f"the static pass reports no site {text!r} in {path.name}"
    return verdicts[0].site


def _run_pytest(folder: Path, tag: str) -> dict[str, str]:
    """Run every reproducer in ``folder`` in one pytest subprocess; test module -> passed/failed/error."""
    report = folder.parent / f"{tag}.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", str(folder)],
        capture_output=True,
        text=True,
        cwd=str(folder),
        timeout=600,
    )
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failed = case.find("failure") is not None
        errored = case.find("error") is not None
        message = "".join(
            (case.find("failure") if failed else case.find("error") if errored else case).itertext()
        )
        outcomes[case.get("classname", "").rpartition(".")[2]] = (
            ("failed: " + message) if failed else ("error: " + message) if errored else "passed"
        )
    assert outcomes, proc.stdout + proc.stderr
    return outcomes


def _fix(path: Path, site: Site, title_start: str) -> None:
    text = path.read_text()
    fixes = [
        f
        for f in propose_fixes(text, Verdict(site=site, status=Status.CONFIRMED))
        if f.title.startswith(title_start)
    ]
    assert fixes, f"no fix starting with {title_start!r}"
    path.write_text(apply_edits(text, fixes[0].edits))


@dataclass
class Case:
    site: Site
    witness: Witness
    program: Path
    fix: Callable[[], None]
    module: str = ""  # the reproducer's file name without .py
    source: str = ""
    payloads: list[str] = field(default_factory=list)


@dataclass
class Batch:
    cases: dict[str, Case]
    before: dict[str, str]
    after: dict[str, str]

    def outcome(self, case: str) -> tuple[str, str]:
        name = self.cases[case].module
        return self.before[name], self.after[name]


def _case(name: str, program: Path, site_text: str, witness: Witness, fix_title: str) -> tuple[str, Case]:
    site = _site(program, site_text)
    return name, Case(site=site, witness=witness, program=program, fix=lambda: _fix(program, site, fix_title))


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Batch:
    """All reproducers written, run once on the buggy programs and once after their fixes."""
    root = tmp_path_factory.mktemp("reproducers")
    programs, repro = root / "programs", root / "repro"
    cases: dict[str, Case] = {}

    p = _copy("entry_log_softmax.py", programs, "softmax_entry.py")
    cases.update(
        [
            _case(
                "entry",
                p,
                "torch.log(F.softmax(x, dim=-1))",
                Witness(
                    entry=f"entry:{p}:make",
                    inputs={"x": TensorValue([2, 3], "float32", [[0.0, -200.0, 0.0], [0.1, 0.2, 0.3]])},
                    weights_moved={},
                    operand=None,
                    result="-inf",
                ),
                "Use log_softmax",
            )
        ]
    )

    p = _copy("entry_logsigmoid.py", programs, "sigmoid_import.py")
    # logsigmoid adds `import torch.nn.functional as F` above the site: the lines move
    cases.update(
        [
            _case(
                "import",
                p,
                "torch.log(1 - torch.sigmoid(logits))",
                Witness(
                    entry=f"entry:{p}:make",
                    inputs={"logits": TensorValue([4], "float32", [0.3, -1.2, 200.0, 0.5])},
                    weights_moved={},
                    operand=None,
                    result="-inf",
                ),
                "Use F.logsigmoid",
            )
        ]
    )

    p = _copy("entry_logsigmoid.py", programs, "sigmoid_wrong_fix.py")
    name, case = _case(
        "wrong",
        p,
        "torch.log(torch.sigmoid(logits))",
        Witness(
            entry=f"entry:{p}:make",
            inputs={"logits": TensorValue([4], "float32", [-200.0, -1.2, 2.0, 0.5])},
            weights_moved={},
            operand=None,
            result="-inf",
        ),
        "",
    )

    def wrong_fix(path: Path = p) -> None:  # a clamp at 0 is no guard for log: still -inf
        path.write_text(
            path.read_text().replace(
                "torch.log(torch.sigmoid(logits))", "torch.log(torch.sigmoid(logits).clamp_min(0.0))"
            )
        )

    case.fix = wrong_fix
    cases[name] = case

    def breaking(name: str, program: Path, site_text: str, witness: Witness, old: str, new: str) -> None:
        """A case whose program is changed by replacing ``old`` with ``new`` after the first run."""
        name, case = _case(name, program, site_text, witness, "")

        def edit(path: Path = program) -> None:
            text = path.read_text()
            assert old in text, (old, path)
            path.write_text(text.replace(old, new, 1))

        case.fix = edit
        cases[name] = case

    def softmax_witness(p: Path) -> Witness:
        return Witness(
            entry=f"entry:{p}:make",
            inputs={"x": TensorValue([2, 3], "float32", [[0.0, -200.0, 0.0], [0.1, 0.2, 0.3]])},
            weights_moved={},
            operand=None,
            result="-inf",
        )

    site_text = "torch.log(F.softmax(x, dim=-1))"
    p = _copy("entry_log_softmax.py", programs, "softmax_raises.py")  # NameError before the site
    breaking(
        "raises",
        p,
        site_text,
        softmax_witness(p),
        "    logp = torch.log",
        "    undefined_name\n    logp = torch.log",
    )
    p = _copy("entry_log_softmax.py", programs, "softmax_syntax.py")
    breaking("syntax", p, site_text, softmax_witness(p), "def make():", "def make(:")
    p = _copy("entry_log_softmax.py", programs, "softmax_gone.py")  # the entry no longer calls the function
    breaking(
        "gone",
        p,
        site_text,
        softmax_witness(p),
        "return loss, (x, target)",
        "return (lambda x, target: (x - target).sum()), (x, target)",
    )
    p = _copy("entry_log_softmax.py", programs, "softmax_rewritten.py")  # op rewritten away, output still NaN
    breaking("rewritten", p, site_text, softmax_witness(p), site_text, "F.log_softmax(x / 0.0, dim=-1)")

    p = _copy("entry_log_softmax.py", programs, "softmax_payload.py")
    rows = [[0.0, -200.0, 0.0]] + [[0.1, 0.2, 0.3]] * 39
    cases.update(
        [
            _case(
                "payload",
                p,
                "torch.log(F.softmax(x, dim=-1))",
                Witness(
                    entry=f"entry:{p}:make",
                    inputs={
                        "x": TensorValue([40, 3], "float32", rows),
                        "target": TensorValue([40, 3], "float32", [[1.0, 0.0, 0.0]] * 40),
                    },
                    weights_moved={},
                    operand=None,
                    result="-inf",
                ),
                "Clamp",
            )
        ]
    )

    p = _copy("backward_norm.py", programs, "norm_backward.py")
    cases.update(
        [
            _case(
                "backward",
                p,
                "torch.sqrt((v * v).sum(dim=-1))",
                Witness(
                    entry=f"entry:{p}:make",
                    inputs={"v": TensorValue([1, 2], "float32", [[0.0, 0.0]])},
                    weights_moved={},
                    operand=None,
                    result="inf",
                    phase="backward",
                ),
                "Clamp",
            )
        ]
    )

    p = _copy("entry_log_softmax.py", programs, "softmax_probe.py")
    cases.update(
        [
            _case(
                "probe",
                p,
                "torch.log(F.softmax(logits, dim=-1))",
                Witness(
                    entry=f"probe:{p}:Head",
                    inputs={"x": TensorValue([1, 4], "float32", [[900.0, -900.0, 5.0, 1.0]])},
                    weights_moved={},
                    operand=None,
                    result="-inf",
                    seed=0,
                ),
                "Use log_softmax",
            )
        ]
    )

    # a real witness: the engine confirms log(p) in a script (entered as `script:`, so replay)
    from grist_lsp.dynamic.engine import confirm
    from grist_lsp.dynamic.options import EngineOptions

    p = _copy("script_entropy.py", programs / "script", "entropy_script.py")
    text = p.read_text()
    verdicts = confirm(
        str(p),
        text,
        analyze_source(str(p), text),
        EngineOptions(budget=2.0, seed=0, project_root=str(p.parent)),
    )
    confirmed = [v for v in verdicts if v.status is Status.CONFIRMED and v.site.text == "torch.log(p)"]
    assert confirmed, [(v.status, v.site.text, v.reason) for v in verdicts]
    cases["script"] = Case(
        site=confirmed[0].site,
        witness=confirmed[0].witness,
        program=p,
        fix=lambda: _fix(p, confirmed[0].site, "Clamp"),
    )
    # the same witness on copies (same file name: inputs are keyed by it) that break after the first run
    for name, old, new in (
        ("script_raises", "torch.manual_seed(0)\n", "torch.manual_seed(0)\nundefined_name\n"),
        ("script_syntax", "torch.manual_seed(0)", "torch.manual_seed(0"),
    ):
        copy = _copy("script_entropy.py", programs / name, "entropy_script.py")
        witness = dataclasses.replace(confirmed[0].witness, entry=f"script:{copy}")
        site = dataclasses.replace(confirmed[0].site, file=str(copy))

        def edit(path: Path = copy, old: str = old, new: str = new) -> None:
            path.write_text(path.read_text().replace(old, new, 1))

        cases[name] = Case(site=site, witness=witness, program=copy, fix=edit)

    for name, case in cases.items():
        path = write_reproducer(case.site, case.witness, str(repro), filename=f"test_grist_{name}.py")
        case.source = Path(path).read_text()
        case.module = Path(path).stem
        case.payloads = sorted(f.name for f in repro.glob(Path(path).stem + "*.pt"))
    before = _run_pytest(repro, "before")
    for case in cases.values():
        case.fix()
    after = _run_pytest(repro, "after")
    return Batch(cases, before, after)


def _fails_then_errors(batch: Batch, case: str) -> str:
    before, after = batch.outcome(case)
    assert before.startswith("failed"), before
    assert after.startswith("error: "), after
    return after


def _fails_then_passes(batch: Batch, case: str) -> tuple[str, str]:
    before, after = batch.outcome(case)
    assert before.startswith("failed"), before
    assert after == "passed", after
    return before, after


def test_entry_witness_reproducer_is_plain_torch_and_fails_until_fixed(batch: Batch) -> None:
    case = batch.cases["entry"]
    assert "grist_lsp" not in case.source  # plain torch: runs without grist-lsp installed
    assert "torch.tensor([[0.0, -200.0, 0.0], [0.1, 0.2, 0.3]], dtype=torch.float32)" in case.source
    assert case.payloads == []
    before, _ = _fails_then_passes(batch, "entry")
    assert "torch.log" in before and "-inf" in before


def test_reproducer_follows_the_site_when_the_fix_adds_an_import_line(batch: Batch) -> None:
    _fails_then_passes(batch, "import")
    assert "import torch.nn.functional as F" in batch.cases["import"].program.read_text()


def test_a_wrong_fix_keeps_the_reproducer_failing(batch: Batch) -> None:
    before, after = batch.outcome("wrong")
    assert before.startswith("failed") and after.startswith("failed"), (before, after)


def test_large_inputs_go_to_a_payload_file_beside_the_test(batch: Batch) -> None:
    case = batch.cases["payload"]
    assert len(case.payloads) == 1 and "PAYLOAD['x']" in case.source
    _fails_then_passes(batch, "payload")


def test_backward_witness_checks_the_gradient(batch: Batch) -> None:
    before, _ = _fails_then_passes(batch, "backward")
    assert "gradient of torch.sqrt" in before


def test_probe_witness_rebuilds_the_module_with_the_seed(batch: Batch) -> None:
    assert "function='Head.forward'" in batch.cases["probe"].source
    _fails_then_passes(batch, "probe")


def test_script_witness_from_the_engine_uses_replay(batch: Batch) -> None:
    case = batch.cases["script"]
    assert case.witness.entry.startswith("script:")
    assert "from grist_lsp.dynamic.replay import replay" in case.source
    _fails_then_passes(batch, "script")


def test_a_program_that_raises_before_the_site_errors_instead_of_passing(batch: Batch) -> None:
    after = _fails_then_errors(batch, "raises")
    assert "cannot judge" in after and "NameError" in after and "undefined_name" in after


def test_a_program_that_does_not_parse_errors_instead_of_passing(batch: Batch) -> None:
    after = _fails_then_errors(batch, "syntax")
    assert "cannot judge" in after and "SyntaxError" in after


def test_a_program_that_no_longer_runs_the_site_errors_instead_of_passing(batch: Batch) -> None:
    after = _fails_then_errors(batch, "gone")
    assert "cannot judge" in after and "without running that line" in after


def test_an_op_rewritten_away_is_judged_by_the_values_the_program_makes(batch: Batch) -> None:
    before, after = batch.outcome("rewritten")
    assert before.startswith("failed") and after.startswith("failed"), (before, after)
    assert "(rewritten)" in after and "nan" in after


def test_a_replayed_script_that_raises_or_does_not_parse_errors(batch: Batch) -> None:
    raised = _fails_then_errors(batch, "script_raises")
    assert "NameError" in raised and "undefined_name" in raised
    assert "SyntaxError" in _fails_then_errors(batch, "script_syntax")


def test_every_reproducer_says_how_to_install_pytest(batch: Batch) -> None:
    for case in batch.cases.values():
        assert case.source.startswith("# Run it: python -m pytest"), case.source[:200]
        assert "pip install pytest" in case.source.splitlines()[1]


def test_a_broken_program_makes_pytest_exit_1_with_an_error_not_a_pass(batch: Batch) -> None:
    """One reproducer alone, as a user runs it: exit status 1, reported as an error."""
    folder = batch.cases["raises"].program.parent.parent / "repro"
    test_file = folder / "test_grist_raises.py"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        cwd=str(folder),
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 error" in proc.stdout and "passed" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("entry", ["entry:{p}:make", "probe:{p}:Head(3)", "script:{p}", "test:{p}::test_x"])
def test_rendered_source_compiles_for_every_entry_kind(tmp_path: Path, entry: str) -> None:
    program = _copy("entry_log_softmax.py", tmp_path)
    site = _site(program, "torch.log(F.softmax(x, dim=-1))")
    witness = Witness(
        entry=entry.format(p=program),
        inputs={"x": TensorValue([1], "float32", ["nan"]), "dim": TensorValue([], "python:int", -1)},
        weights_moved={},
        operand=None,
        result="nan",
    )
    repro = render_reproducer(site, witness, str(tmp_path))
    compile(repro.source, repro.filename, "exec")
    assert repro.filename.startswith("test_") and repro.filename.endswith(".py")
    assert "def test_log_at_entry_log_softmax_line_18_is_finite" in repro.source


def test_replay_reproducer_carries_file_held_tensors_beside_it(tmp_path: Path) -> None:
    import torch

    program = _copy("script_entropy.py", tmp_path)
    site = _site(program, "torch.log(p)")
    held = tmp_path / "cache" / "big.pt"
    held.parent.mkdir()
    torch.save(torch.zeros(300), held)
    witness = Witness(
        entry=f"script:{program}",
        inputs={"script_entropy.py:6:torch.rand#0": TensorValue([300], "float32", None, file=str(held))},
        weights_moved={},
        operand=None,
        result="-inf",
    )
    repro = render_reproducer(site, witness, str(tmp_path / "repro"))
    [(name, data)] = repro.payloads.items()
    assert name == "test_grist_script_entropy_8_log_script_entropy_py_6_torch_rand_0.pt"
    assert data == held.read_bytes()
    assert str(held) not in repro.source  # the cache path does not leak into the test
    assert f"with_name({name!r})" in repro.source
    assert f'WITNESS["entry"].replace({str(program)!r}, str(PROGRAM))' in repro.source


def test_cli_written_reproducer_fails_on_the_bug_and_errors_once_the_program_raises(tmp_path: Path) -> None:
    """``grist-lsp --check --write-reproducers DIR``, then pytest on DIR as a user would."""
    program = _copy("script_entropy.py", tmp_path / "project")
    out = tmp_path / "project" / "tests" / "grist"
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "grist_lsp",
            "--check",
            str(program),
            "--budget",
            "2",
            "--seed",
            "0",
            "--write-reproducers",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 1, check.stdout + check.stderr  # a confirmed bug
    [test_file] = [f for f in out.glob("test_grist_*.py") if "_log" in f.name]

    buggy = cm.pytest_on(test_file)
    assert buggy.returncode == 1 and "1 failed" in buggy.stdout, buggy.stdout
    program.write_text(
        program.read_text().replace("weights = torch.rand(6)", "weights = torch.rand(6)\nundefined_name")
    )
    broken = cm.pytest_on(test_file)
    assert broken.returncode == 1 and "1 error" in broken.stdout and "passed" not in broken.stdout, (
        broken.stdout
    )
    assert "cannot judge" in broken.stdout and "NameError" in broken.stdout
