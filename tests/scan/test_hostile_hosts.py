"""`validator scan` against hosts that misbehave on purpose, over a real OpenSSH sshd: a host
that floods its output is stopped at once (not after the timeout), and `--env` values never
appear on the node's command lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scan.conftest import LOUD, LOUD_ERR, SPY, ScanSshd, run_scan

pytestmark = [pytest.mark.root]


def test_a_host_flooding_its_output_is_stopped_as_too_much_output(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    """50 MB on stdout or stderr, then the command hangs: the outcome says "too much output",
    decided when the cap is reached: waiting for the end of file would end in a "timeout"
    outcome when --timeout runs out."""
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan(f"{LOUD},{LOUD_ERR}", "-F", str(cfg), "--timeout", "100")
    assert run.doc is not None, run.err
    assert "Traceback" not in run.err
    for host, stream in ((LOUD, "stdout"), (LOUD_ERR, "stderr")):
        outcome = run.outcome(host)
        assert outcome is not None and outcome["status"] == "unparsed", outcome
        assert "too much output" in outcome["detail"] and stream in outcome["detail"], outcome
    assert run.rc == 3


def test_env_values_travel_on_stdin_not_on_the_remote_command_line(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    """The spy host records the command sshd runs (the shell's and the agent's command line, as
    `ps` shows them to every user of the node): the values are not in it, and still reach the
    agent (GLOO_SOCKET_IFNAME comes back in the facts: a CPU job uses Gloo; HF_TOKEN is never collected)."""
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    spy = scan_sshd.dir / "spy" / "command"
    spy.unlink(missing_ok=True)
    run = run_scan(
        SPY, "-F", str(cfg), "--timeout", "60",
        "--env", "GLOO_SOCKET_IFNAME=marker-ifname-7f3a", "--env", "HF_TOKEN=hf_secret_value_91c2",
    )  # fmt: skip
    assert run.doc is not None and run.hosts == [SPY], run.err
    command = spy.read_text()
    assert "python3" in command and "-c" in command  # the spy saw the agent's command line
    assert "marker-ifname-7f3a" not in command and "hf_secret_value_91c2" not in command
    assert "HF_TOKEN" not in command and "GLOO_SOCKET_IFNAME" not in command
    assert "marker-ifname-7f3a" in run.out, run.out  # delivered: the Gloo interface finding quotes it
    assert "hf_secret_value_91c2" not in run.out + run.err
