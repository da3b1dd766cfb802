"""Interfaces and NCCL/Gloo selection against real captures (tests/fixtures/network/*/, made by
capture.sh from this machine and from network-namespace hosts), rules from reference §2.1."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from validator.agent.probe import _slim, port_probe
from validator.facts.network import gloo_select, master_facts, nccl_select, parse_if_list, parse_interfaces
from validator.model import Interface

NET = Path(__file__).resolve().parent.parent / "fixtures" / "network"
OLD, NEW = "2.21.5", "2.28.3"


def load(host: str, fallback: bool = False) -> list[Interface]:
    d = NET / host
    sysfs = json.loads((d / "sysfs.json").read_text())
    if fallback:
        return parse_interfaces(json.loads((d / "ifaddrs-fallback.json").read_text()), sysfs)
    return parse_interfaces([_slim(link) for link in json.loads((d / "ip-addr.json").read_text())], sysfs)


def by_name(host: str, fallback: bool = False) -> dict[str, Interface]:
    return {i["name"]: i for i in load(host, fallback)}


def nccl(host: str, version: str | None = NEW, **env: str) -> tuple[list[str], str | None, str | None]:
    s = nccl_select(load(host), env, version)
    return s["ifaces"], s["addr"], s["error"]


# ---------------------------------------------------------------- interfaces


def test_this_machine() -> None:
    ifs = by_name("this-machine")
    assert list(ifs) == ["lo", "ifb0", "ifb1", "eth0"]
    assert ifs["eth0"]["addrs"] == ["192.0.2.2/24", "fd00::2/64", "fe80::fc:ff:fe00:1/64"]
    assert (ifs["eth0"]["up"], ifs["eth0"]["running"], ifs["eth0"]["virtual"], ifs["eth0"]["mtu"]) == (
        True,
        True,
        False,
        1400,
    )
    assert ifs["lo"]["loopback"] and ifs["lo"]["running"] and not ifs["lo"]["virtual"]
    assert ifs["ifb0"]["kind"] == "ifb" and ifs["ifb0"]["virtual"] and not ifs["ifb0"]["up"]
    assert ifs["eth0"]["speed_mbps"] is None  # sysfs says -1 on this virtio NIC


def test_idle_docker_bridge_has_no_carrier() -> None:
    d0 = by_name("eth-docker")["docker0"]
    assert (d0["up"], d0["running"], d0["virtual"], d0["kind"]) == (True, False, True, "bridge")
    assert d0["addrs"][0] == "172.17.0.1/16"


def test_admin_down_interface_and_pod_style_veths() -> None:
    ifs = by_name("ens5-down")
    assert (ifs["eth1"]["up"], ifs["eth1"]["running"]) == (False, False)
    assert ifs["ens5"]["kind"] == "veth" and not ifs["ens5"]["virtual"]  # like a pod's eth0
    assert ifs["docker0"]["running"] and ifs["docker0"]["virtual"]
    assert ifs["docker0c"]["virtual"]  # named docker*: virtual whatever its kind
    assert ifs["ens5"]["speed_mbps"] == 10000


@pytest.mark.parametrize("host", ["eth-docker", "ens5-down", "ib-virbr", "this-machine"])
def test_iproute2_fallback_agrees_with_ip_on_what_matters(host: str) -> None:
    """Without iproute2 the agent reads ioctls and /proc/net/if_inet6; kind and MTU come from sysfs."""
    main, fb = by_name(host), by_name(host, fallback=True)
    assert list(fb) == list(main)
    for name, i in main.items():
        keys = ("up", "running", "loopback", "mtu")
        assert {k: fb[name][k] for k in keys} == {k: i[k] for k in keys}, name
        assert sorted(fb[name]["addrs"]) == sorted(i["addrs"]), name
        assert fb[name]["virtual"] == i["virtual"], name


# ---------------------------------------------------------------- NCCL selection


def test_default_on_this_machine() -> None:
    s = nccl_select(load("this-machine"), {}, None)
    assert (s["ifaces"], s["addr"], s["rule"]) == (["eth0"], "192.0.2.2/24", "default: not docker/lo/virbr")


def test_default_prefers_ib_over_everything() -> None:
    assert nccl("ib-virbr")[:2] == (["ib0"], "10.88.0.13/24")


def test_default_falls_back_to_docker_before_lo() -> None:
    ifaces, addr, err = nccl("docker-only")
    assert ifaces[0] == "docker0" and addr == "172.17.0.1/16" and err is None
    assert nccl("lo-only")[:2] == (["lo"], "127.0.0.1/8")


def test_virbr_is_excluded_since_2_28_and_comes_after_lo() -> None:
    only_virbr = [i for i in load("ib-virbr") if i["name"] in ("lo", "virbr0")]
    assert nccl_select(only_virbr, {}, NEW)["ifaces"] == ["lo"]
    assert nccl_select(only_virbr, {}, OLD)["ifaces"] == ["virbr0"]  # <= 2.27: step 3 was ^docker,lo
    without_lo = [i for i in only_virbr if i["name"] == "virbr0"]
    assert nccl_select(without_lo, {}, NEW)["rule"] == "default: virbr* (nothing else found)"


def test_running_filter_since_2_28() -> None:
    assert nccl("eth-docker", OLD, NCCL_SOCKET_IFNAME="docker")[0] == ["docker0"]  # no carrier, still used
    ifaces, _, err = nccl("eth-docker", NEW, NCCL_SOCKET_IFNAME="docker")
    assert ifaces == [] and err is not None and "no socket interface found" in err
    assert nccl("ens5-down", OLD)[0] == ["ens5", "eth1"]  # admin-down eth1 still a candidate
    assert nccl("ens5-down", NEW)[0] == ["ens5"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("eth", ["eth0"]),  # prefix
        ("=eth0", ["eth0"]),  # exact
        ("=eth", []),  # exact: no interface is called "eth"
        ("eth0:29400", ["eth0"]),  # :port suffix is not part of the name
        ("^docker,lo", ["eth0"]),  # exclude
        ("^=docker0,lo", ["eth0"]),  # ^ then = : exact exclude
        ("^eth,docker", ["lo"]),  # exclude leaves loopback as the only choice
        ("e", ["eth0"]),  # length <= 1: ignored, default selection
        ("^", ["eth0"]),  # also length 1
        ("^=", []),  # empty exact exclude list excludes everything
        ("docker,eth", ["eth0"]),  # list order does not matter, link order does
    ],
)
def test_socket_ifname_rules(value: str, expected: list[str]) -> None:
    # eth-docker on NCCL 2.28: lo, eth0, docker0 (no carrier) and its veth ends
    assert nccl("eth-docker", NEW, NCCL_SOCKET_IFNAME=value)[0] == expected


def test_parse_if_list() -> None:
    assert parse_if_list("^=eth0:1,ib0:2:1") == (True, True, ["eth0", "ib0"])
    assert parse_if_list("ens") == (False, False, ["ens"])


def test_comm_id_subnet_step() -> None:
    ifaces, addr, _ = nccl("ens5-down", OLD, NCCL_COMM_ID="10.77.0.1:5000")
    assert (ifaces, addr) == (["eth1"], "10.77.0.12/24")
    assert nccl("ens5-down", NEW, NCCL_COMM_ID="10.77.0.1:5000")[0] == ["ens5"]  # eth1 is not running


def test_ipv4_interfaces_come_before_ipv6_only_ones() -> None:
    """getifaddrs lists IPv4 addresses first: eth1 (IPv4) before eth0 (only IPv6), though eth0 has
    the lower index."""
    assert nccl("v6-first")[:2] == (["eth1", "eth0"], "10.66.0.15/24")
    ifaces, addr, _ = nccl("v6-first", NCCL_SOCKET_FAMILY="AF_INET6")
    assert ifaces == ["eth0", "eth1"] and addr == "fd00:66::15/64"
    assert nccl("v6-first", NCCL_SOCKET_FAMILY="AF_INET")[0] == ["eth1"]
    assert nccl("v6-first", NCCL_SOCKET_FAMILY="bogus")[0] == ["eth1", "eth0"]  # other values ignored


# ---------------------------------------------------------------- Gloo


def test_gloo_named_interfaces() -> None:
    ifs = load("ens5-down")
    ok = gloo_select(ifs, {"GLOO_SOCKET_IFNAME": "ens5"}, "h", [])
    assert (ok["ifaces"], ok["addr"], ok["error"]) == (["ens5"], "10.66.0.12/24", None)
    bad = gloo_select(ifs, {"GLOO_SOCKET_IFNAME": "ens5,eth0"}, "h", [])
    assert bad["error"] is not None and "Unable to find address for: eth0" in bad["error"]
    assert gloo_select(ifs, {"GLOO_SOCKET_IFNAME": "10.66.0."}, "h", [])["error"]  # an IP prefix is no name


@pytest.mark.parametrize(
    ("addrs", "iface", "addr"),
    [
        (["10.66.0.12"], "ens5", "10.66.0.12"),
        (["127.0.1.1"], "lo", "127.0.1.1"),  # /etc/hosts maps the hostname to loopback
        (["10.9.9.9", "10.66.0.12"], "ens5", "10.66.0.12"),  # first *bindable* address
        (["10.9.9.9"], "lo", "127.0.0.1"),  # none of ours: loopback fallback
        ([], "lo", "127.0.0.1"),  # does not resolve: loopback fallback
    ],
)
def test_gloo_default_binds_the_hostnames_first_local_address(addrs: list[str], iface: str, addr: str) -> None:
    s = gloo_select(load("ens5-down"), {}, "ens5-down", addrs)
    assert (s["ifaces"], s["addr"]) == ([iface], addr)


# ---------------------------------------------------------------- master resolution


def master(addr: str, resolved: dict[str, Any], probe: dict[str, Any] | None = None, port: int = 29500) -> Any:
    routes = {a["addrs"][0]: "10.66.0.12" for a in resolved.values() if a.get("addrs")}
    return master_facts(addr, port, resolved, routes, probe, load("ens5-down"))


def test_master_is_this_node() -> None:
    m = master("ens5-down", {"ens5-down": {"addrs": ["10.66.0.12"]}}, {"port": 29500, "free": True})
    assert (m["loopback"], m["local"], m["route_dev"], m["port_free"]) == (False, True, "ens5", True)


def test_master_resolves_to_loopback() -> None:
    m = master("vm", {"vm": {"addrs": ["127.0.0.1"]}})
    assert m["loopback"] and m["local"] and m["resolved"] == ["127.0.0.1"]


def test_master_elsewhere_and_port_probe_for_another_port_ignored() -> None:
    m = master("node001", {"node001": {"addrs": ["10.66.0.11"]}}, {"port": 1234, "free": False})
    assert (m["loopback"], m["local"], m["port_free"]) == (False, False, None)


def test_master_not_resolved() -> None:
    m = master("nosuch", {"nosuch": {"addrs": [], "error": "gaierror: [Errno -2] Name or service not known"}})
    assert m["resolved"] == [] and not m["loopback"] and "Name or service" in str(m["error"])
    assert master_facts(None, None, {}, {}, None, []) is None
    assert master("x", {})["error"] == "not resolved by the agent"


def test_port_probe_names_a_holder_that_does_not_listen() -> None:
    """A real connection whose own port is the probed one: the bind a TCPStore would do is refused, and the holder is
    named though nothing listens there (port_owner reads only listeners)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.socket()
    client.bind(("127.0.0.1", 0))
    client.connect(server.getsockname())
    try:
        got = port_probe(client.getsockname()[1])
    finally:
        client.close()
        server.close()
    assert got["free"] is False
    assert got["owner"].startswith(f"pid {os.getpid()} (") and got["owner"].endswith(
        "as a connection's own port, not a listener"
    )
