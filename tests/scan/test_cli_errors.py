"""Bad input to `validator scan`: one line naming where, exit 2, no traceback, nothing contacted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.scan.conftest import scan_env


def scan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VALIDATOR, "scan", *args], capture_output=True, text=True, env=scan_env(), timeout=60, check=False
    )


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert p.stdout == ""
    return lines[0]


def test_bad_hostlist() -> None:
    assert one_error_line(scan("node[1-")).startswith("validator: error: bad hostlist 'node[1-'")


def test_a_hostlist_with_a_digit_int_refuses() -> None:
    assert one_error_line(scan("node[²-3]")).startswith("validator: error: bad hostlist 'node[²-3]'")


def test_unreadable_host_file(tmp_path: Path) -> None:
    line = one_error_line(scan(f"@{tmp_path}/missing.txt"))
    assert f"{tmp_path}/missing.txt: cannot read host file" in line


def test_bad_line_in_host_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("node1\n# a comment\nnode[3-\n")
    assert f"{hosts}:3: bad hostlist" in one_error_line(scan(f"@{hosts}"))


def test_bad_profile(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("nodes: 2\ngpus_per_nod: 8\n")
    line = one_error_line(scan("127.0.0.1", "--profile", str(profile)))
    assert str(profile) in line and "gpus_per_nod" in line


def test_bad_ssh_config_names_file_and_line(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n  Port notaport\n")
    line = one_error_line(scan("127.0.0.1", "-F", str(cfg)))
    assert f"{cfg} line 2" in line and "notaport" in line


def test_missing_ssh_config(tmp_path: Path) -> None:
    line = one_error_line(scan("127.0.0.1", "-F", str(tmp_path / "nope")))
    assert str(tmp_path / "nope") in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["127.0.0.1", "--env", "NOVALUE"], "--env: expected NAME=VALUE, got 'NOVALUE'"),
        (["127.0.0.1", "--format", "yaml"], "unknown format 'yaml'"),
        (["127.0.0.1", "--slurm-nodes", "n1"], "--slurm-nodes needs --slurm"),
        (["127.0.0.1", "--fanout", "0"], "must be positive"),
        ([], "nothing to scan"),
        (["127.0.0.1", "--select", "XYZ"], "unknown check code or prefix 'XYZ'"),
        (["--k8s", "--slurm"], "--slurm and --k8s exclude each other"),
        (["127.0.0.1", "--k8s", "-l", "job-name=train"], "--k8s chooses its own targets"),
        (["127.0.0.1", "-n", "ml"], "--selector, --namespace and --context need --k8s"),
        (["--local", "--partition", "gpu"], "--local chooses its own targets"),
    ],
)
def test_bad_options(args: list[str], expected: str) -> None:
    assert expected in one_error_line(scan(*args))
