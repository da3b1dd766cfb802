"""`validator scan` of network-namespace hosts (own IP, hostname, interfaces, sshd): each odd
host is named, and only that host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scan.conftest import DOCKER_BRIDGE, DOCKERISH, JUMP_ONLY, ODD_ENV, ODD_IFNAME, OddHosts, ScanRun, run_scan
from validator.model import Report
from validator.report import render

pytestmark = [pytest.mark.root, pytest.mark.slow]


def scan(hosts: OddHosts, odd: int, *extra: str) -> ScanRun:
    """The three plain hosts and one odd one."""
    names = list(dict.fromkeys(hosts.names[i] for i in (0, 1, 2, odd)))
    run = run_scan(",".join(names), "-F", str(hosts.config), *extra)
    assert run.doc is not None, run.err
    assert run.doc["outcomes"] == [], run.doc["outcomes"]
    assert sorted(run.hosts) == sorted(names)
    return run


def gpu_job(tmp_path: Path) -> tuple[str, ...]:
    """Options that make the scanned job a GPU job, NCCL's interface rules then apply: a profile
    with GPUs (NCCL_* settings alone never make one). The hosts stand in for GPU nodes without
    GPUs, which is not what these tests are about: GPU001 and PRF003 are ignored."""
    p = tmp_path / "gpu.yaml"
    p.write_text("name: gpu\ngpus_per_node: 8\n")
    return ("--profile", str(p), "--ignore", "GPU001,PRF003")


def test_plain_hosts_pass(odd_hosts: OddHosts) -> None:
    run = scan(odd_hosts, 2)  # 0, 1, 2, 2: only the plain hosts
    assert run.rc == 0, run.out
    assert run.doc is not None and run.doc["findings"] == [] and run.doc["drain"] == []


def test_different_interface_name_names_that_host(odd_hosts: OddHosts) -> None:
    odd = odd_hosts.names[ODD_IFNAME]
    run = scan(odd_hosts, ODD_IFNAME)
    assert run.named("NET007") == [odd]
    assert run.all_named() == {odd}
    finding = next(f for f in run.doc["findings"] if f["code"] == "NET007")  # type: ignore[index]
    assert (finding["expected"], finding["actual"]) == ("eth0", "ens5")


def test_docker_like_bridge_that_nccl_would_pick_names_that_host(odd_hosts: OddHosts, tmp_path: Path) -> None:
    """NCCL_SOCKET_IFNAME=^docker,lo (the job's setting, passed with --env) does not exclude a
    compose-style bridge: NCCL would use br-<id> on that host."""
    odd = odd_hosts.names[DOCKERISH]
    run = scan(odd_hosts, DOCKERISH, "--env", "NCCL_SOCKET_IFNAME=^docker,lo", *gpu_job(tmp_path))
    assert run.named("NET004") == [odd]
    virtual = next(f for f in run.doc["findings"] if f["code"] == "NET004")  # type: ignore[index]
    assert virtual["actual"] == DOCKER_BRIDGE
    assert run.all_named() == {odd}
    assert run.rc == 0 or run.doc["drain"] in ([], [odd])  # type: ignore[index]


def test_different_environment_names_that_host(odd_hosts: OddHosts) -> None:
    odd = odd_hosts.names[ODD_ENV]
    run = scan(odd_hosts, ODD_ENV)
    assert run.named("ENV002") == [odd]
    assert run.all_named() == {odd}
    assert run.rc == 1
    assert run.doc["drain"] == [odd]  # type: ignore[index]


def test_net_check_names_the_host_whose_nccl_address_is_unreachable(odd_hosts: OddHosts, tmp_path: Path) -> None:
    odd = odd_hosts.names[DOCKERISH]
    net = ("--net-check", "--net-timeout", "2")
    run = scan(odd_hosts, DOCKERISH, "--env", "NCCL_SOCKET_IFNAME=^docker,lo", *gpu_job(tmp_path), *net)
    assert run.doc is not None
    done = run.doc["scan"]["net_check"]
    assert (done["nodes"], done["probes"], done["failed"]) == (4, 6, 2)
    assert run.named("NET101") == [odd]
    unreachable = next(f for f in run.doc["findings"] if f["code"] == "NET101")
    assert "172.18.0.1" in unreachable["message"]
    assert {h.split(" -> ")[0] for h in unreachable["message"].split(": ")[1].split(", ")} == {
        odd_hosts.names[1],  # its neighbour on ring 2 (stride 2 of 4)
        odd_hosts.names[2],  # its neighbour on ring 1
    }
    assert run.rc == 1 and run.doc["drain"] == [odd]


def test_net_check_names_a_throttled_host(odd_hosts: OddHosts) -> None:
    """The scan measures with the preflight's code (validator/netcheck/): host 1's eth0 sends at
    1 Mbit/s (tbf; this kernel has no netem), so all its links are slow, then alone twice: NET105
    names host 1 and no pair."""
    ns = odd_hosts.names[1]
    slow = ["tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1mbit", "burst", "32kbit",
            "latency", "400ms"]  # fmt: skip
    subprocess.run(slow, check=True, capture_output=True)
    try:
        run = scan(odd_hosts, ODD_ENV, "--net-check")
    finally:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"], check=False, capture_output=True)
    speed = [f for f in run.doc["findings"] if f["code"] in ("NET104", "NET105")]  # type: ignore[index]
    assert [(f["code"], f["hosts"]) for f in speed] == [("NET105", ns)], speed
    assert "median" in speed[0]["message"]


def test_net_check_adds_the_named_hosts_gloo_all_reduce_beside_a_control_pair(odd_hosts: OddHosts) -> None:
    """With torch on the nodes (``--python``: this suite's interpreter), the host whose eth0 sends at
    30 Mbit/s is named (NET105), then runs a real two-rank gloo all_reduce with a known-good partner,
    on the namespaces' addresses, beside a control pair of two known-good hosts in the same round:
    its bus bandwidth, far under the control's, is in the finding."""
    ns = odd_hosts.names[1]
    slow = ["tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "30mbit", "burst", "64kbit",
            "latency", "400ms"]  # fmt: skip
    subprocess.run(slow, check=True, capture_output=True)
    try:
        run = scan(odd_hosts, ODD_ENV, "--net-check", "--python", sys.executable, "-l", "root")  # root reads /root
    finally:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"], check=False, capture_output=True)
    speed = [f for f in run.doc["findings"] if f["code"] in ("NET104", "NET105")]  # type: ignore[index]
    assert [(f["code"], f["hosts"]) for f in speed] == [("NET105", ns)], speed
    node, control = run.doc["scan"]["net_check"]["allreduce"]  # type: ignore[index]
    assert (node["role"], node["pair"][0], node["backend"], node["error"]) == ("node", ns, "gloo", ""), node
    assert control["role"] == "control" and ns not in control["pair"] and node["control"] == control["pair"]
    assert 0 < node["busbw_gbps"] * 3 < control["busbw_gbps"], (node, control)
    assert 256 << 10 <= node["bytes"] < control["bytes"] == 4 << 20  # the slow pair's size fits its pace
    assert speed[0]["message"].endswith(
        f"; all_reduce (gloo, 2 ranks, {node['bytes'] / (1 << 20):.3g} MiB) with {node['pair'][1]}: "
        f"{node['busbw_gbps']:.3g} GB/s bus bandwidth, "
        f"a control pair ({', '.join(control['pair'])}) {control['busbw_gbps']:.3g} GB/s"
    )


def test_net_check_passes_between_plain_hosts(odd_hosts: OddHosts) -> None:
    run = scan(odd_hosts, ODD_IFNAME, "--net-check")
    assert run.doc is not None
    net = run.doc["scan"]["net_check"]
    assert (net["nodes"], net["probes"], net["failed"], net["measured"], net["confirmed"]) == (4, 6, 0, 6, 0)
    assert [f for f in run.doc["findings"] if f["code"].startswith("NET1")] == []
    assert (
        net["rtt_ms"]["median"] > 0 and 0 < net["up_mbps"]["p10"] <= net["up_mbps"]["median"] <= net["up_mbps"]["p90"]
    )
    assert net["line"].startswith("net check: 6 links, all within 3x of the median link; median ")
    report = Report.from_json(run.doc)  # the table and the HTML page say that the net check ran, and passed
    for fmt in ("table", "html"):
        assert "net check: 6 links, all within 3x of the median link" in render(report, fmt), fmt


def test_proxyjump_from_ssh_config(odd_hosts: OddHosts) -> None:
    """That host refuses the test's own address; only the jump through host 0 gets in."""
    alias = f"{odd_hosts.names[JUMP_ONLY]}-via-jump"
    direct = run_scan(odd_hosts.names[JUMP_ONLY], "-F", str(odd_hosts.config))
    assert direct.doc is not None and direct.outcome(odd_hosts.names[JUMP_ONLY])["status"] == "auth"  # type: ignore[index]
    jumped = run_scan(alias, "-F", str(odd_hosts.config))
    assert jumped.doc is not None and jumped.hosts == [alias], jumped.err
    assert jumped.rc == 0


def test_html_report_of_a_real_scan_renders_and_names_the_host_to_drain(odd_hosts: OddHosts, tmp_path: Path) -> None:
    from tests.conftest import VALIDATOR
    from tests.scan.conftest import scan_env
    from tests.scan.test_html import chromium

    odd = odd_hosts.names[ODD_ENV]
    page = tmp_path / "scan.html"
    names = [*odd_hosts.names[:3], odd, odd_hosts.names[ODD_IFNAME]]
    p = subprocess.run(
        [*VALIDATOR, "scan", ",".join(names), "-F", str(odd_hosts.config), "-f", "html", "-o", str(page)],
        capture_output=True, text=True, env=scan_env(), timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    dom = chromium(
        page, Path(os.environ["VALIDATOR_SCREENSHOT_REAL"]) if "VALIDATOR_SCREENSHOT_REAL" in os.environ else None
    )
    assert f"scontrol update nodename={odd} state=drain" in dom
    assert "ENV002" in dom and "NET007" in dom


def test_every_pair_option_reaches_the_net_check_through_the_transport(odd_hosts: OddHosts) -> None:
    """Four hosts: the rings already hold every pair, so the sweep adds none (6 hosts and more:
    tests/integration/test_netcheck_sweep.py); the report says what was asked and what it cost."""
    run = scan(odd_hosts, ODD_IFNAME, "--net-check", "--net-check-pairs", "all")
    assert run.doc is not None
    net = run.doc["scan"]["net_check"]
    assert (net["pairs"], net["measured"], net["sweep"]["rounds"], net["sweep"]["pairs"]) == ("all", 6, 0, 0)
    assert "; every pair: 0 off the rings in 0 rounds, " in net["line"]
