"""The CLI as a new user meets it (issue 12, item 4), through real `python -m validator`
subprocesses: -h everywhere, metavars instead of Python types, every format listed where it
works, every level named when one is wrong, `profiles validate` reporting every file, -q, the
headline of an incomplete run, SW004's verification command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.factories import rank_job, tweak
from tests.preflight.conftest import preflight, ranks
from validator.model import Facts

ROOT = Path(__file__).resolve().parent.parent.parent
COMMANDS = [
    [],
    ["probe"],
    ["check"],
    ["explain"],
    ["schema"],
    ["scan"],
    ["diagnose"],
    ["rehearse"],
    ["profiles"],
    ["profiles", "validate"],
    ["baseline"],
    ["baseline", "record"],
    ["preflight"],
    ["node-check"],
]
PYTHON_TYPE = re.compile(r"<(str|int|float|path|bool|list\[[a-z]+\])>")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validator", *args], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )


def save(tmp_path: Path, job: list[Facts]) -> list[str]:
    paths = []
    for i, f in enumerate(job):
        p = tmp_path / f"rank{i}.json"
        p.write_text(json.dumps(f))
        paths.append(str(p))
    return paths


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "validator")
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_takes_h_and_help(command: list[str], flag: str) -> None:
    p = run(*command, flag)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Usage: validator"), p.stdout[:200]
    assert "Options:" in p.stdout
    assert not PYTHON_TYPE.search(p.stdout), PYTHON_TYPE.search(p.stdout)
    assert "{" not in p.stdout.split("\n\n", 1)[0], p.stdout.split("\n", 1)[0]  # the usage line: no {files}


def test_help_uses_one_set_of_metavars() -> None:
    for command in (["check"], ["scan"], ["diagnose"], ["preflight"], ["node-check"]):
        text = run(*command, "-h").stdout
        assert "--format FORMAT" in text and "--fail-on LEVEL" in text, command
    for command in (["check"], ["scan"], ["preflight"]):
        text = run(*command, "-h").stdout
        assert "--select CODES" in text and "--ignore CODES" in text, command
        assert "-p, --profile FILE" in text and "-o, --output FILE" in text and "-f, --format FORMAT" in text, command


@pytest.mark.parametrize(
    ("command", "formats"),
    [
        (["check"], "table, json, junit, html, markdown"),
        (["scan"], "table, json, junit, html, markdown"),
        (["diagnose"], "table, json, junit"),
        (["rehearse"], "table, json, junit"),
        (["preflight"], "table, json"),
        (["node-check"], "table, json"),
    ],
)
def test_help_lists_the_formats_that_work(command: list[str], formats: str) -> None:
    assert f"report format: {formats}" in " ".join(run(*command, "-h").stdout.split())


def test_check_renders_every_format_its_help_lists(tmp_path: Path) -> None:
    files = save(tmp_path, rank_job(2, 2))
    outputs = {}
    for fmt in ("table", "json", "junit", "html", "markdown"):
        p = run("check", *files, "-f", fmt)
        assert p.returncode == 0, (fmt, p.stderr)
        outputs[fmt] = p.stdout
    assert outputs["table"].startswith("cluster-validator check: no findings")
    assert json.loads(outputs["json"])["participants"] == 4
    assert outputs["junit"].startswith("<?xml") and outputs["html"].startswith("<!DOCTYPE html>")
    assert outputs["markdown"].startswith("## cluster-validator check\n\n**PASSED**: no findings")
    bad = run("check", *files, "-f", "yaml")
    assert bad.returncode == 2
    assert (
        bad.stderr
        == "validator: error: --format: unknown format 'yaml'; use one of: table, json, junit, html, markdown\n"
    )
    bad = run("diagnose", str(tmp_path), "-f", "html")
    assert bad.returncode == 2 and "use one of: table, json, junit\n" in bad.stderr


@pytest.mark.parametrize("command", [["check", "x.json"], ["scan", "node1"], ["diagnose", "x.log"]])
def test_a_wrong_fail_level_names_all_four(command: list[str]) -> None:
    p = run(*command, "--fail-on", "bogus")
    assert p.returncode == 2
    assert p.stderr == "validator: error: --fail-on: unknown level 'bogus'; use one of: error, warning, info, never\n"


@pytest.mark.parametrize("command", [["preflight"], ["node-check"]])
def test_a_wrong_fail_level_names_all_four_on_the_lean_parsers(command: list[str]) -> None:
    p = run(*command, "--fail-on", "bogus")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "(choose from 'error', 'warning', 'info', 'never')" in p.stderr


def test_fail_on_never_and_upper_case_are_accepted(tmp_path: Path) -> None:
    job = tweak(rank_job(2, 1), 1, software={"python": "3.10.12"})
    files = save(tmp_path, job)
    assert run("check", *files, "--fail-on", "WARNING").returncode == 1
    assert run("check", *files, "--fail-on", "never").returncode == 0


def test_profiles_validate_reports_every_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("name: good\nnodes: 2\nlauncher: torchrun\nversions:\n  torch: '2.5.*'\n")
    bad1 = tmp_path / "bad1.yaml"
    bad1.write_text("nodes: 2\nnodez: 3\n")
    bad2 = tmp_path / "bad2.yaml"
    bad2.write_text("launcher: pdsh\n")
    p = run("profiles", "validate", str(bad1), str(good), str(bad2))
    assert p.returncode == 2
    assert p.stdout == f"{good}: ok (good; pins launcher, nodes, versions.torch)\n"
    assert p.stderr.splitlines() == [
        f"validator: error: {bad1}:2: unknown key 'nodez' (did you mean 'nodes'?)",
        f"validator: error: {bad2}:1: launcher must be one of torchrun, slurm, kubeflow, trainer, jobset, lws, "
        "indexed-job, mpi, mpich, flux, deepspeed, env, none, got 'pdsh'",
    ]
    assert run("profiles", "validate", str(good)).returncode == 0


def test_sw004_verifies_the_python_version_not_torch(tmp_path: Path) -> None:
    job = tweak(rank_job(3, 1), 2, software={"python": "3.10.12"})
    p = run("check", *save(tmp_path, job), "-f", "json", "--select", "SW004")
    (finding,) = json.loads(p.stdout)["findings"]
    assert finding["code"] == "SW004" and finding["actual"] == "3.10.12"
    assert "sys.version" in finding["verify"] and "torch" not in finding["verify"]


def test_an_incomplete_run_does_not_say_no_findings(tmp_path: Path) -> None:
    """Rank 0 of two waits 2 s for rank 1, which never starts: exit 3, and the headline above
    "FAILED (exit 3)" says what is missing."""
    (coordinator,) = preflight(tmp_path, ranks(2, free_port())[:1], "--timeout", "2", limit=60)
    assert coordinator.rc == 3, coordinator.err
    lines = coordinator.err.splitlines()
    headline = next(line for line in lines if line.startswith("cluster-validator preflight"))
    assert "no findings" not in headline and "1 without facts" in headline, headline
    assert any("FAILED (exit 3)" in line for line in lines)


def test_quiet_prints_only_the_verdict_line(tmp_path: Path) -> None:
    """docs/preflight.md: `--quiet` prints the verdict line only, on the coordinator too."""
    (loud,) = preflight(tmp_path, ranks(1, free_port()), limit=60)
    (quiet,) = preflight(tmp_path, ranks(1, free_port()), "-q", limit=60)
    assert loud.rc == quiet.rc == 0, quiet.err
    assert len(loud.err.splitlines()) > 1 and loud.err.splitlines()[-1].startswith("preflight PASSED: 1/1 ranks in ")
    assert len(quiet.err.splitlines()) == 1 and quiet.err.startswith("preflight PASSED: 1/1 ranks in "), quiet.err
