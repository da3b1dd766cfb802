"""The user's OpenSSH setup is honoured: ~/.ssh/config (User, Port, IdentityFile), ssh-agent."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scan.conftest import GOOD, ScanSshd, run_scan, scan_env

pytestmark = [pytest.mark.root]


def test_home_ssh_config_is_read_by_default(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    scan_sshd.config(home / ".ssh" / "config")  # Port, User, IdentityFile, UserKnownHostsFile
    run = run_scan(GOOD[0], env=scan_env(HOME=str(home)))
    assert run.rc == 0, run.err
    assert run.doc is not None and run.hosts == [GOOD[0]]
    empty = tmp_path / "empty"
    (empty / ".ssh").mkdir(parents=True)
    without = run_scan(GOOD[0], "--connect-timeout", "3", env=scan_env(HOME=str(empty)))
    assert without.rc == 3 and without.outcome(GOOD[0]) is not None  # port 22 of 127.0.3.20: nothing there


@pytest.fixture()
def agent(scan_sshd: ScanSshd, tmp_path: Path) -> Iterator[str]:
    """A real ssh-agent holding the test key; stopped by pid."""
    sock = tmp_path / "agent.sock"
    out = subprocess.run(
        ["ssh-agent", "-s", "-a", str(sock)], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    pid = int(out.split("SSH_AGENT_PID=", 1)[1].split(";", 1)[0])
    try:
        subprocess.run(
            ["ssh-add", "-q", str(scan_sshd.key)],
            env={"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"},
            check=True,
            timeout=30,
            capture_output=True,
        )
        yield str(sock)
    finally:
        subprocess.run(["kill", str(pid)], check=False, timeout=30)


def test_ssh_agent_keys_are_used(scan_sshd: ScanSshd, agent: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    cfg = scan_sshd.config(tmp_path / "ssh_config", identity=False)  # no IdentityFile: the agent's key only
    run = run_scan(GOOD[1], "-F", str(cfg), env=scan_env(HOME=str(home), SSH_AUTH_SOCK=agent))
    assert run.rc == 0, run.err
    assert run.doc is not None and run.hosts == [GOOD[1]]
    no_agent = run_scan(GOOD[1], "-F", str(cfg), env=scan_env(HOME=str(home)))
    assert no_agent.outcome(GOOD[1])["status"] == "auth"  # type: ignore[index]


def test_user_option_overrides_the_config(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan(GOOD[2], "-F", str(cfg), "--user", "no-such-user-cv")
    assert run.outcome(GOOD[2])["status"] == "auth"  # type: ignore[index]
    assert "no-such-user-cv" in run.outcome(GOOD[2])["detail"]  # type: ignore[index]
