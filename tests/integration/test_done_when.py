"""Issue 2's "Done when": `validator probe --json` run under four hand-set environments, as four
ranks of one job on this machine would see it, then `validator check` on the four files reports
a duplicate rank, a WORLD_SIZE outlier and a MASTER_ADDR that resolves to loopback, each naming
the right rank. Real processes, real resolver, real interfaces: nothing is faked."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import free_port
from validator.model import Report

BIN = Path(sys.executable).parent / "validator"


def probe(env: dict[str, str]) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    p = subprocess.run(
        [str(BIN), "probe", "--json"], env={**clean, **env}, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def routable_address(facts: dict[str, Any]) -> str:
    """This machine's address for the good ranks, read from its own facts (no hard-coding)."""
    for iface in facts["network"]["interfaces"]:
        if iface["running"] and not iface["loopback"] and not iface["virtual"]:
            for cidr in iface["addrs"]:
                ip = ipaddress.ip_interface(cidr).ip
                if ip.version == 4 and not ip.is_link_local:
                    return str(ip)
    raise AssertionError("no routable IPv4 address on this machine")


def loopback_name(facts_of: dict[str, Any]) -> str:
    """The hostname when /etc/hosts maps it to loopback (as on this VM: vm -> 127.0.0.1), else localhost."""
    gloo = facts_of["network"]["gloo"]
    return socket.gethostname() if str(gloo["addr"]).startswith("127.") else "localhost"


def test_four_hand_set_ranks(tmp_path: Path) -> None:
    here = probe({})
    good, loop = routable_address(here), loopback_name(here)
    port = str(free_port())
    job = {"WORLD_SIZE": "4", "MASTER_ADDR": good, "MASTER_PORT": port}
    envs = [
        {**job, "RANK": "0", "LOCAL_RANK": "0"},
        {**job, "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": loop},  # resolves to loopback
        {**job, "RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "5"},  # WORLD_SIZE outlier
        {**job, "RANK": "0", "LOCAL_RANK": "3"},  # a second rank 0
    ]
    files = []
    for i, env in enumerate(envs):
        facts = probe(env)
        assert facts["launch"]["rank"] == int(env["RANK"])
        path = tmp_path / f"rank{i}.json"
        path.write_text(json.dumps(facts))
        files.append(str(path))
    master = json.loads(Path(files[1]).read_text())["network"]["master"]
    assert master["loopback"] and master["addr"] == loop  # the real resolver said so

    p = subprocess.run(
        [str(BIN), "check", *files, "--format", "json"], capture_output=True, text=True, timeout=60, check=False
    )
    assert p.returncode == 1, p.stderr
    report = Report.from_json(json.loads(p.stdout))
    named = {f.code: f.ranks for f in report.findings}
    assert named["RNK001"] == [0]  # duplicate rank
    assert named["RNK004"] == [2]  # WORLD_SIZE outlier
    assert named["RDZ004"] == [1]  # MASTER_ADDR -> loopback
    dup = next(f for f in report.findings if f.code == "RNK001")
    pids = [str(json.loads(Path(files[n]).read_text())["pid"]) for n in (0, 3)]
    assert all(pid in dup.message for pid in pids)  # both processes are named
    loopback = next(f for f in report.findings if f.code == "RDZ004")
    assert loop in loopback.message and "127." in loopback.message
    assert "RDZ001" not in named  # the loopback rank is reported once, not also as "MASTER_ADDR differs"

    table = subprocess.run([str(BIN), "check", *files], capture_output=True, text=True, timeout=60, check=False).stdout
    assert "RNK001  Duplicate rank" in table and "rank 0" in table
    assert "RDZ004  MASTER_ADDR resolves to loopback" in table
