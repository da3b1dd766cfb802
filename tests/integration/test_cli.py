"""The real `validator` console script and `python -m validator`, as subprocesses: every exit code,
every output format parsed back, bad input named by file and line (or host and field) while every
readable input is still reported."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.factories import rank_job, tweak
from validator.checks import CHECKS
from validator.model import Facts

BIN = Path(sys.executable).parent / "validator"
ROOT = Path(__file__).resolve().parent.parent.parent


def run(*args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "validator", *args] if module else [str(BIN), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)


def save(tmp_path: Path, job: list[Facts], name: str = "rank{}.json") -> list[str]:
    paths = []
    for i, f in enumerate(job):
        p = tmp_path / name.format(i)
        p.write_text(json.dumps(f))
        paths.append(str(p))
    return paths


@pytest.fixture
def healthy(tmp_path: Path) -> list[str]:
    return save(tmp_path, rank_job(2, 2))


@pytest.fixture
def duplicate(tmp_path: Path) -> list[str]:
    return save(tmp_path, tweak(rank_job(2, 2), 3, launch={"rank": 2}))


def test_exit_0_on_a_healthy_job(healthy: list[str]) -> None:
    p = run("check", *healthy)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("cluster-validator check: no findings — 4 participants on 2 hosts")
    assert p.stderr == ""


def test_exit_1_names_the_culprit(duplicate: list[str]) -> None:
    p = run("check", *duplicate)
    assert p.returncode == 1, p.stderr
    assert "RNK001  Duplicate rank — node002 · rank 2" in p.stdout


def test_python_dash_m_is_the_same_program(duplicate: list[str]) -> None:
    p = run("check", *duplicate, module=True)
    assert p.returncode == 1 and "RNK001" in p.stdout
    assert run("--version", module=True).stdout.startswith("cluster-validator ")


def test_fail_on_select_and_ignore(tmp_path: Path) -> None:
    files = save(tmp_path, tweak(rank_job(2, 2), 1, env={"NCCL_DEBUG": "INFO"}))  # ENV001: a warning
    assert run("check", *files).returncode == 0
    assert run("check", *files, "--fail-on", "warning").returncode == 1
    assert run("check", *files, "--fail-on", "never", "--format", "json").returncode == 0
    assert run("check", *files, "--fail-on", "warning", "--ignore", "ENV").returncode == 0
    assert run("check", *files, "--fail-on", "warning", "--select", "RNK,RDZ001").returncode == 0
    assert run("check", *files, "--fail-on", "warning", "--select", "env001").returncode == 1  # case-insensitive


def test_json_output_parses(duplicate: list[str], tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    p = run("check", *duplicate, "--format", "json", "--output", str(out))
    assert p.returncode == 1 and p.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["participants"] == 4 and doc["summary"]["error"] >= 1
    dup = next(f for f in doc["findings"] if f["code"] == "RNK001")
    assert (dup["ranks"], dup["hosts"], dup["severity"]) == ("2", "node002", "error")


def test_junit_output_parses(duplicate: list[str]) -> None:
    p = run("check", *duplicate, "-f", "junit", "--select", "RNK")
    assert p.returncode == 1
    suite = ET.fromstring(p.stdout.split("?>", 1)[1])
    names = [c.get("name", "") for c in suite.iter("testcase")]
    assert len(names) == len([c for c in CHECKS if c.startswith("RNK")]) and all(n.startswith("RNK") for n in names)
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert "RNK001 Duplicate rank" in failed


# ---------------------------------------------------------------- exit 2: bad input, still reported


def test_malformed_json_names_file_and_line_and_the_rest_is_checked(duplicate: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "schema": 1,\n  "kind": "facts",\n  "host": oops\n}\n')
    p = run("check", *duplicate, str(bad))
    assert p.returncode == 2
    assert f"validator: {bad}:4: not valid JSON: Expecting value" in p.stderr
    assert "RNK001" in p.stdout and f"INPUT   {bad}:4" in p.stdout
    assert "4 participants" in p.stdout


def test_truncated_file(healthy: list[str], tmp_path: Path) -> None:
    whole = Path(healthy[0]).read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: len(whole) // 2])
    p = run("check", *healthy[1:], str(cut))
    assert p.returncode == 2
    assert f"{cut}:1: not valid JSON" in p.stderr and "truncated file?" in p.stderr
    assert "3 participants" in p.stdout


def test_json_lines_with_one_truncated_line(tmp_path: Path) -> None:
    job = rank_job(2, 2)
    lines = [json.dumps(f) for f in job]
    lines[1] = lines[1][:100]
    f = tmp_path / "all.jsonl"
    f.write_text("\n".join(lines) + "\n")
    p = run("check", str(f))
    assert p.returncode == 2
    assert f"{f}:2: not valid JSON" in p.stderr
    assert "3 participants" in p.stdout  # the lines after the bad one are still read


def test_newer_schema(healthy: list[str], tmp_path: Path) -> None:
    doc = json.loads(Path(healthy[0]).read_text())
    doc["schema"] = 99
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(doc))
    p = run("check", *healthy[1:], str(newer))
    assert p.returncode == 2
    assert f"{newer}: facts schema 99 is newer than this validator understands" in p.stderr


def test_wrong_field_type_names_host_and_field(healthy: list[str], tmp_path: Path) -> None:
    doc = json.loads(Path(healthy[2]).read_text())
    doc["launch"]["world_size"] = "4"
    typo = tmp_path / "typed.json"
    typo.write_text(json.dumps(doc))
    p = run("check", *healthy[:2], str(typo))
    assert p.returncode == 2
    assert f"validator: {typo}: host node002: launch.world_size: expected an integer, got str '4'" in p.stderr
    assert "2 participants" in p.stdout


def test_profile_with_a_typo_names_file_and_line(duplicate: list[str], tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: p\nnodes: 2\nranks_per_nod: 2\n")
    p = run("check", *duplicate, "--profile", str(prof))
    assert p.returncode == 2
    assert p.stderr == f"validator: error: {prof}:3: unknown key 'ranks_per_nod' (did you mean 'ranks_per_node'?)\n"
    assert p.stdout == ""  # one line, as every other command: no report checked without the profile


def test_missing_profile_is_one_line_naming_the_file(duplicate: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    for fmt in ("table", "json", "junit"):
        p = run("check", *duplicate, "--profile", str(missing), "--format", fmt)
        assert (p.returncode, p.stdout) == (2, ""), p.stdout
        assert p.stderr == f"validator: error: {missing}: cannot read profile: No such file or directory\n"


def test_unknown_select_code_and_unknown_format(healthy: list[str]) -> None:
    p = run("check", *healthy, "--select", "XYZ")
    assert (
        p.returncode == 2
        and p.stderr.strip() == "validator: error: unknown check code or prefix 'XYZ' (see `validator explain --list`)"
    )
    p = run("check", *healthy, "--format", "yaml")
    assert p.returncode == 2 and "unknown format 'yaml'" in p.stderr and "Traceback" not in p.stderr


def test_missing_file_and_usage_errors(healthy: list[str]) -> None:
    p = run("check", *healthy, "/nonexistent/facts.json")
    assert p.returncode == 2 and "/nonexistent/facts.json: cannot read" in p.stderr and "4 participants" in p.stdout
    assert run("check").returncode == 2  # no files: click's usage error
    assert run("check", *healthy, "--fail-on", "fatal").returncode == 2


def test_profile_matching_and_not(tmp_path: Path) -> None:
    files = save(tmp_path, rank_job(2, 8))
    prof = ROOT / "launch_profiles" / "torchrun-2x8.yaml"
    p = run("check", *files, "--profile", str(prof))
    assert p.returncode == 1  # the profile pins hosts gpu[01-02]; these are node001-002
    assert "PRF008" in p.stdout and "PRF001" not in p.stdout and "PRF002" not in p.stdout


# ---------------------------------------------------------------- explain, profiles validate


def test_explain() -> None:
    p = run("explain", "rdz004")
    assert p.returncode == 0
    assert p.stdout.startswith("RDZ004 (error): MASTER_ADDR resolves to loopback")
    assert "What it checks:" in p.stdout and "How to fix:" in p.stdout
    listing = run("explain", "--list").stdout
    assert "RNK001  error   Duplicate rank" in listing and "VAL001" in listing
    bad = run("explain", "XYZ999")
    assert bad.returncode == 2 and "unknown code 'XYZ999'" in bad.stderr


def test_profiles_validate(tmp_path: Path) -> None:
    shipped = sorted(str(p) for p in (ROOT / "launch_profiles").glob("*.yaml"))
    p = run("profiles", "validate", *shipped)
    assert p.returncode == 0 and p.stdout.count(": ok (") == len(shipped)
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: 2\nversions:\n  torh: '2.5'\n")
    p = run("profiles", "validate", str(bad))
    assert p.returncode == 2
    assert p.stderr.strip() == f"validator: error: {bad}:3: unknown key 'versions.torh' (did you mean 'torch'?)"
