"""An IPv6 rendezvous address: MASTER_ADDR=::1 (torchrun and c10d take IPv6 literals; clusters on IPv6-only networks
give them). Real parts: two `validator preflight` processes on loopback, emulating two nodes of one rank each (so the
second reaches the coordinator over TCP, on ::1, not over the node-local socket), with the net check; the report
writes the endpoint as ``[::1]:PORT``."""

from __future__ import annotations

from pathlib import Path

from tests.preflight.conftest import preflight, tails


def test_an_ipv6_master_address_rehearses_and_passes(tmp_path: Path, port: int) -> None:
    envs = [
        {"RANK": str(n), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(n),
         "SLURMD_NODENAME": node, "MASTER_ADDR": "::1", "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": "v6"}
        for n, node in enumerate(("nodea", "nodeb"))
    ]  # fmt: skip
    runs = preflight(tmp_path, envs, "--timeout", "30", "--net-check", "--hosts", "nodea,nodeb", limit=60)
    assert [r.rc for r in runs] == [0, 0], tails(runs)
    assert f"cluster-validator preflight ([::1]:{port}, job v6): no findings" in runs[0].err, runs[0].err
    assert "preflight PASSED: 2/2 ranks in " in runs[0].err and "over 1 TCP connection(s)" in runs[0].err, runs[0].err
    assert "net check: 2 links ok" in runs[0].err, runs[0].err
    assert runs[0].report is not None and runs[0].report["findings"] == []
