"""--net-check names a slow node and a slow link (NET105, NET104) between four real hosts
(network namespaces on one bridge), and stays silent on a healthy ring.

Rates are throttled with `tc` (tbf and htb). Delay and loss (NFQUEUE, iptables: this kernel has
no netem) are planted in tests/integration/test_netcheck_faults.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NetnsHosts, free_port
from tests.preflight.conftest import base_env
from validator.targets import expand

pytestmark = [pytest.mark.root]


def net_check(h: NetnsHosts, tmp_path: Path) -> list[tuple[int, dict[str, Any]]]:
    """All four hosts run `validator preflight --net-check`; (exit code, report) of each."""
    port = free_port()
    procs = []
    for i in range(4):
        env = base_env(RANK=str(i), LOCAL_RANK="0", WORLD_SIZE="4", GROUP_RANK=str(i),
                       MASTER_ADDR=h.addrs[0], MASTER_PORT=str(port))  # fmt: skip
        out = tmp_path / f"net-{port}-{i}.json"
        cmd = h.exec(i, sys.executable, "-m", "validator", "preflight", "--net-check", "--timeout", "30",
                     "--output", str(out))  # fmt: skip
        procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out))
    results = []
    for proc, out in procs:
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        assert out.exists(), err[-2000:]
        results.append((proc.returncode, {**json.loads(out.read_text()), "stderr": err[-2000:]}))
    return results


def speed(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for f in report["findings"]:
        if f["code"] in ("NET101", "NET104", "NET105"):
            found.setdefault(f["code"], []).append(f)
    return found


@contextmanager
def tc(ns: str, *commands: list[str]) -> Iterator[None]:
    """Shape eth0's egress in namespace ``ns`` for the duration; the root qdisc is removed after."""
    try:
        for c in commands:
            subprocess.run(["tc", "-n", ns, *c], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"], check=False, capture_output=True)


def test_healthy_ring_is_silent(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    runs = net_check(netns_hosts, tmp_path)
    assert [rc for rc, _ in runs] == [0, 0, 0, 0], runs[0][1]["findings"]
    assert speed(runs[0][1]) == {}
    measured = runs[0][1]["preflight"]  # the JSON carries what was measured, not only the findings
    assert measured["net_check"]["measured"] >= 4 and measured["net_check"]["allreduce"] == []
    assert measured["probes"] is None and measured["exclude"]["hosts"] == []
    assert measured["exclude"]["keep"] == netns_hosts.names


def test_a_throttled_host_is_named_as_the_node(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    h = netns_hosts
    slow = ["qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1mbit", "burst", "32kbit", "latency", "400ms"]
    with tc(h.names[2], slow):
        runs = net_check(h, tmp_path)
    found = speed(runs[0][1])
    assert list(found) == ["NET105"], runs[0][1]["stderr"]
    (node,) = found["NET105"]
    assert node["hosts"] == h.names[2]
    assert "known-good nodes it was paired with" in node["message"] and "median" in node["message"]
    assert all(rc == 0 for rc, _ in runs)  # a warning: the job may still run, slowly
    # then the named host's gloo all_reduce with a known-good partner, beside a control pair of two others
    # (rank 0 and rank 1 children of the participants, torch from this suite's interpreter)
    assert re.search(
        r"; all_reduce \(gloo, 2 ranks, [\d.]+ MiB\) with \S+: [\d.e-]+ GB/s bus bandwidth, a control "
        r"pair \(\S+, \S+\) [\d.e-]+ GB/s$",
        node["message"],
    ), node["message"]
    # the same in the JSON: the all_reduce rows, and the node to take out in each launcher's form
    for _, report in runs:  # every participant got the coordinator's document
        measured = report["preflight"]
        named = [r for r in measured["net_check"]["allreduce"] if r["role"] == "node"]
        assert len(named) == 1 and h.names[2] in named[0]["pair"] and named[0]["busbw_gbps"] > 0, measured
        (control,) = [r for r in measured["net_check"]["allreduce"] if r["role"] == "control"]
        assert named[0]["control"] == control["pair"] and h.names[2] not in control["pair"]
        assert named[0]["busbw_gbps"] < control["busbw_gbps"]
        assert measured["exclude"]["hosts"] == [h.names[2]]
        assert measured["exclude"]["slurm"]["exclude"] == f"--exclude={h.names[2]}"
    assert f"--exclude={h.names[2]}" in runs[0][1]["stderr"]  # the text report says it too


def test_one_throttled_link_is_named_as_the_pair(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    h = netns_hosts
    # host 0 sends slowly to host 1 only: an htb class at 1 Mbit/s for that destination
    with tc(h.names[0],
            ["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "20"],
            ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "1mbit", "burst", "32kbit"],
            ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit"],
            ["filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "u32", "match", "ip", "dst",
             f"{h.addrs[1]}/32", "flowid", "1:10"]):  # fmt: skip
        runs = net_check(h, tmp_path)
    found = speed(runs[0][1])
    assert list(found) == ["NET104"], runs[0][1]["stderr"]  # its "net check:" line: suspects, rounds
    (link,) = found["NET104"]
    assert set(expand(link["hosts"])) == {h.names[0], h.names[1]}
    assert "out " in link["actual"] or "back " in link["actual"]
