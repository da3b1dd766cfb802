"""The code registry: one table per family, read by `explain`, the docs and --select/--ignore;
a malformed, duplicate or unimportable declaration fails loudly; VAL900 is a registered code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import node_job
from validator import pipeline
from validator.checks import CHECKS, meta, run_checks
from validator.checks.base import Check, Hit, Job, check
from validator.codes import Code, code, table
from validator.docs import expected_pages, list_codes
from validator.model import Severity
from validator.registry import registry

ROOT = Path(__file__).resolve().parent.parent.parent
TEXT = "What it checks.\n\nWhy it matters.\n\nHow to fix."


def validator(*args: str, pythonpath: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "validator", *args], capture_output=True, text=True, timeout=60,
                          check=False, cwd=pythonpath, env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_every_reader_sees_the_same_codes() -> None:
    codes = registry()
    assert list(codes) == sorted(codes) and {"RNK001", "NET101", "PRE005", "DGN013", "NOD004", "VAL900"} <= set(codes)
    assert [line.split()[0] for line in list_codes().splitlines()] == list(codes)
    assert set(expected_pages()) == {f"{c}.md" for c in codes} | {"README.md"}
    assert pipeline.resolve_codes([], []) == list(codes)
    assert pipeline.resolve_codes(["VAL"], ["VAL001"]) == ["VAL900"]
    assert set(CHECKS) < set(codes) and all(isinstance(c, Check) for c in CHECKS.values())
    assert not any(isinstance(c, Check) for k, c in codes.items() if k not in CHECKS)  # stages' codes: no function


def test_val900_is_explained() -> None:
    p = validator("explain", "val900")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("VAL900 (error): Check crashed\n") and "How to fix: Report the bug" in p.stdout


def test_a_crashing_check_is_a_val900_finding_from_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    @check("RNK999", Severity.ERROR, "Crashes")
    def boom(job: Job) -> Iterator[Hit]:
        """Crashes.

        Always.

        Fix the check."""
        raise KeyError("x" * 2000)

    monkeypatch.setitem(CHECKS, "RNK999", boom)
    (f,) = run_checks(node_job(2), codes=["RNK999"])
    assert (f.code, f.severity, f.title, f.fix) == ("VAL900", Severity.ERROR, meta.crashed.title, meta.crashed.hint)
    assert f.message.startswith("check RNK999 raised KeyError: 'xxx") and len(f.message) < 1100  # bounded


def test_a_finding_carries_the_records_fix_and_verify_unless_it_names_better_ones() -> None:
    c = code("DGN099", Severity.ERROR, "T", TEXT, verify="rerun", hint="do this")
    assert (c.what, c.why, c.fix) == ("What it checks.", "Why it matters.", "How to fix.")
    assert (c.finding("m").fix, c.finding("m").verify) == ("do this", "rerun")
    assert (c.finding("m", fix="better", verify="run me").fix, c.finding("m", verify="run me").verify) == (
        "better",
        "run me",
    )


@pytest.mark.parametrize("bad", ["XYZ001", "RNK01", "rnk001", "RNK0012", ""])
def test_an_unknown_or_malformed_code_fails(bad: str) -> None:
    with pytest.raises(ValueError, match="not a finding code"):
        code(bad, Severity.ERROR, "T", TEXT)


def test_a_text_without_three_paragraphs_fails() -> None:
    with pytest.raises(ValueError, match="RNK998: 2 paragraphs"):
        code("RNK998", Severity.ERROR, "T", "What.\n\nWhy.")
    with pytest.raises(ValueError, match="RNK998: 1 paragraphs"):

        @check("RNK998", Severity.ERROR, "T")
        def undocumented(job: Job) -> Iterator[Hit]:
            yield from ()


def test_a_code_declared_twice_fails() -> None:
    dup = code("NET101", Severity.ERROR, "Another NET101", TEXT)
    with pytest.raises(ValueError, match="NET101 declared twice"):
        table(*registry().values(), dup)
    with pytest.raises(ValueError, match="RNK001 declared twice"):
        table(CHECKS["RNK001"], CHECKS["RNK001"])


def test_a_broken_family_module_fails_loudly(tmp_path: Path) -> None:
    """A copy of the package whose diagnose codes cannot import: explain, the docs and
    --select stop with the import error instead of silently dropping COL/DGN."""
    shutil.copytree(ROOT / "validator", tmp_path / "validator", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tmp_path / "validator" / "diagnose" / "codes.py"
    broken.write_text(broken.read_text() + "\nimport validator.no_such_module\n")
    for args in (["explain", "--list"], ["explain", "RNK001"]):
        p = validator(*args, pythonpath=tmp_path)
        assert p.returncode != 0 and "No module named 'validator.no_such_module'" in p.stderr, p.stderr
        assert "RNK001" not in p.stdout
    docs = subprocess.run([sys.executable, "-m", "validator.docs", "--check", str(ROOT / "docs" / "checks")],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert docs.returncode != 0 and "validator.no_such_module" in docs.stderr


def test_the_stages_codes_are_records_without_a_function() -> None:
    from validator.checks import netcheck
    from validator.diagnose import codes as diagnose
    from validator.preflight import findings as preflight

    for family in (netcheck.CODES, preflight.CODES, diagnose.CODES):
        assert family and all(type(c) is Code for c in family.values())
    assert all(type(c) is Code for k, c in registry().items() if k.startswith("NOD"))


def test_every_code_a_family_module_declares_is_in_its_table() -> None:
    """A check written but left out of its module's ``CODES`` would never run: none is."""
    from validator.checks import gpu, ib, k8s, net, netcheck, profile, rank, rdzv, software, system
    from validator.nodecheck import codes as nodecheck
    from validator.preflight import findings as preflight

    for family in (rank, k8s, rdzv, gpu, net, ib, software, system, profile, meta, netcheck, preflight, nodecheck):
        declared = {v.code for v in vars(family).values() if isinstance(v, Code)}
        assert declared == set(family.CODES), family.__name__


def test_a_retired_code_names_its_successor_and_explain_shows_it() -> None:
    from validator.docs import explain_text, list_codes, page

    retired = {k: c for k, c in registry().items() if c.status == "retired"}
    assert retired == {"PRE005": registry()["PRE005"]} and retired["PRE005"].successor == "NET101"
    assert "see NET101 (`validator explain NET101`)" in explain_text("PRE005")
    assert "(retired: NET101)" in list_codes()
    assert "[NET101](NET101.md)" in page(retired["PRE005"])
    with pytest.raises(ValueError, match="successor"):
        code("PRE099", Severity.ERROR, "t", "a\n\nb\n\nc", successor="bogus")
    with pytest.raises(ValueError, match="successor"):
        Code("PRE098", Severity.ERROR, "t", "a", "b", "c", status="retired")
