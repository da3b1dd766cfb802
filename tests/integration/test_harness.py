"""The real services the integration tests stand on start, answer, and are told apart."""

from __future__ import annotations

import subprocess

from tests.conftest import NetnsHosts, Slurm, Sshd


def test_sshd_answers_as_many_hosts(sshd_loopback: Sshd) -> None:
    out = subprocess.run(
        ["ssh", "-F", str(sshd_loopback.config), "127.0.0.7", "echo $SSH_CONNECTION"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert out.split()[2] == "127.0.0.7"


def test_netns_hosts_have_own_names_and_addresses(netns_hosts: NetnsHosts) -> None:
    for i, name in enumerate(netns_hosts.names):
        out = subprocess.run(
            netns_hosts.exec(i, "sh", "-c", "hostname; ip -4 -o addr show eth0"),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert out.splitlines()[0] == name
        assert netns_hosts.addrs[i] + "/24" in out


def test_slurm_spans_logical_nodes(slurm: Slurm) -> None:
    out = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=1", "bash", "-c", "echo $SLURMD_NODENAME"],
        env=slurm.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert sorted(out.split()) == ["n1", "n2"]
