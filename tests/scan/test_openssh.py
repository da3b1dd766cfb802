"""`validator scan --openssh`: the system ssh client against real sshds (loopback, and network
namespace hosts for ProxyJump). The scenarios every transport shares are in
test_transport_conformance.py; here, what is OpenSSH's own: its failures named as ssh's
transport names them, a ControlMaster the scan goes through (asyncssh ignores ControlMaster: it
cannot), ProxyJump into a host that refuses the scanner, and hosts that would be options."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.scan.conftest import (
    CHANGED,
    CLOSED,
    GOOD,
    JUMP_ONLY,
    NO_ACCESS,
    SPY,
    UNKNOWN_KEY,
    OddHosts,
    ScanSshd,
    run_scan,
    scan_env,
)

pytestmark = [pytest.mark.root]


def test_bad_hosts_are_outcomes_named_as_ssh_names_them(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan("--openssh", ",".join([*GOOD[:2], NO_ACCESS, CLOSED, CHANGED, UNKNOWN_KEY]), "-F", str(cfg))
    assert run.doc is not None and run.rc == 3, run.err
    assert run.doc["scan"]["transport"] == "openssh" and sorted(run.hosts) == GOOD[:2]
    statuses = {o["target"]: o["status"] for o in run.doc["outcomes"]}
    assert statuses == {NO_ACCESS: "auth", CLOSED: "unreachable", CHANGED: "hostkey", UNKNOWN_KEY: "hostkey"}
    detail = {o["target"]: o["detail"] for o in run.doc["outcomes"]}
    assert "Connection refused" in detail[CLOSED] and "--accept-new-host-keys" in detail[UNKNOWN_KEY]
    assert "Permission denied" in detail[NO_ACCESS] and "Traceback" not in run.err


def test_accept_new_host_keys_records_the_key_as_ssh_does(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    cfg = scan_sshd.config(tmp_path / "ssh_config", known_hosts=known)
    refused = run_scan("--openssh", UNKNOWN_KEY, "-F", str(cfg))
    assert refused.doc is not None and refused.outcome(UNKNOWN_KEY)["status"] == "hostkey"  # type: ignore[index]
    accepted = run_scan("--openssh", UNKNOWN_KEY, "-F", str(cfg), "--accept-new-host-keys")
    assert accepted.doc is not None and accepted.hosts == [UNKNOWN_KEY], accepted.err
    assert scan_sshd.host_pub.split()[1] in known.read_text()  # recorded by ssh itself


def test_env_values_travel_on_stdin_not_on_the_remote_command_line(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan("--openssh", SPY, "-F", str(cfg), "--env", "WANDB_API_KEY=sk-secret-4711")
    assert run.doc is not None and run.hosts == [SPY], run.err
    command = (scan_sshd.dir / "spy" / "command").read_text()
    assert command.startswith("python3 -c ") and "sk-secret-4711" not in command


def test_net_check_listens_and_probes_through_ssh(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    """``start`` (the listeners, stdin held open) and ``stop`` through ssh processes."""
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan("--openssh", ",".join(GOOD[:3]), "-F", str(cfg), "--net-check")
    assert run.doc is not None and run.doc["outcomes"] == [], run.err
    net = run.doc["scan"]["net_check"]
    assert (net["nodes"], net["measured"], net["failed"]) == (3, 3, 0), net


@pytest.fixture
def master(scan_sshd: ScanSshd, tmp_path: Path) -> Iterator[Path]:
    """An OpenSSH ControlMaster to GOOD[0], started as a user would (``ssh -M -N -f``), stopped by
    its pid (``ssh -O check`` says it)."""
    tmp_path.chmod(0o755)
    sock = tmp_path / "cm.sock"
    cfg = scan_sshd.config(tmp_path / "master_config", extra=f"Host *\n  ControlPath {sock}\n")
    subprocess.run(["ssh", "-F", str(cfg), "-M", "-N", "-f", "-o", "BatchMode=yes", GOOD[0]], check=True, timeout=30)
    check = subprocess.run(["ssh", "-F", str(cfg), "-O", "check", GOOD[0]], capture_output=True, text=True, timeout=30)
    found = re.search(r"pid=(\d+)", check.stderr)
    assert found, check.stderr
    try:
        yield sock
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(found.group(1)), signal.SIGTERM)


def test_a_controlmaster_carries_the_scan(scan_sshd: ScanSshd, master: Path, tmp_path: Path) -> None:
    """The scan's config sends GOOD[0] to a closed port: only the master already connected gets there.
    The asyncssh transport, which has no ControlMaster, is refused."""
    cfg = scan_sshd.config(
        tmp_path / "ssh_config",
        extra=f"Host {GOOD[0]}\n  ControlMaster no\n  ControlPath {master}\n  Port {scan_sshd.closed_port}\n",
    )
    through = run_scan("--openssh", GOOD[0], "-F", str(cfg))
    assert through.doc is not None and through.hosts == [GOOD[0]] and through.rc == 0, through.err
    direct = run_scan(GOOD[0], "-F", str(cfg))
    assert direct.doc is not None and direct.outcome(GOOD[0])["status"] == "unreachable"  # type: ignore[index]


@pytest.mark.slow
def test_proxyjump_into_a_host_that_refuses_the_scanner(odd_hosts: OddHosts) -> None:
    """That host refuses the test's own address; only the jump through host 0 gets in."""
    host = odd_hosts.names[JUMP_ONLY]
    direct = run_scan("--openssh", host, "-F", str(odd_hosts.config))
    assert direct.doc is not None and direct.outcome(host)["status"] == "auth", direct.err  # type: ignore[index]
    jumped = run_scan("--openssh", f"{host}-via-jump", "-F", str(odd_hosts.config))
    assert jumped.doc is not None and jumped.hosts == [f"{host}-via-jump"] and jumped.rc == 0, jumped.err


@pytest.mark.parametrize("where", ["argument", "file"])
def test_a_host_that_would_be_an_ssh_option_is_refused(scan_sshd: ScanSshd, tmp_path: Path, where: str) -> None:
    tmp_path.chmod(0o755)
    pwned = tmp_path / "pwned"
    host = f"-oProxyCommand=touch {pwned}"
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{GOOD[0]}\n{host}\n")
    target = ["--", host] if where == "argument" else [f"@{hosts}"]
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    p = subprocess.run([*VALIDATOR, "scan", "--openssh", "-F", str(cfg), *target], capture_output=True, text=True,
                       env=scan_env(), timeout=120, check=False)  # fmt: skip
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.splitlines() == [f"validator: error: --openssh: host {host!r} starts with '-': ssh would read "
                                     "it as an option"]  # fmt: skip
    assert not pwned.exists()
