"""NET: the interfaces NCCL and Gloo would use exist, are up, routable and alike on every node.

NCCL matters for GPU jobs, Gloo for CPU jobs (and for GPU jobs that create gloo groups). Loopback
and "same subnet" only matter when the job spans hosts.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

from validator.checks.base import Check, Hit, Job, check, describe, outliers
from validator.codes import table
from validator.facts.network import is_loopback
from validator.model import Interface, Severity

IP = "ip -br addr show   # on each named host"


def _chosen(job: Job, i: int) -> tuple[str, str | None, str]:
    """(library, interface, rule) that carries this node's traffic (computed once per node)."""
    return _chosen_all(job)[i]


def _chosen_all(job: Job) -> dict[int, tuple[str, str | None, str]]:
    return _both(job)[0]


Chosen = tuple[dict[int, tuple[str, str | None, str]], dict[int, Interface | None], dict[int, str | None]]


def _both(job: Job) -> Chosen:
    """``_chosen``, ``_chosen_iface`` and the library's address of every node, in one pass over
    the nodes' network facts."""

    def compute() -> Chosen:
        lib, which = ("NCCL", "nccl") if job.uses_gpus else ("Gloo", "gloo")
        chosen: dict[int, tuple[str, str | None, str]] = {}
        ifaces: dict[int, Interface | None] = {}
        addrs: dict[int, str | None] = {}
        for i, net in zip(job.node_reps, job.node_column("network"), strict=True):
            sel = net[which]
            name = next(iter(sel["ifaces"]), None)
            chosen[i] = (lib, name, sel["rule"])
            addrs[i] = sel["addr"]
            for iface in net["interfaces"]:
                if iface["name"] == name:
                    ifaces[i] = iface
                    break
            else:
                ifaces[i] = None
        return chosen, ifaces, addrs

    return job.memo("net.chosen", compute)


def _chosen_iface(job: Job, i: int) -> Interface | None:
    """The interface record of ``_chosen`` (computed once per node)."""
    return _both(job)[1][i]


def _chosen_ifaces(job: Job) -> dict[int, Interface | None]:
    return _both(job)[1]


def _network(cidr: str) -> str:
    """``10.1.2.3/24`` -> ``10.1.2.0/24``: IPv4 by arithmetic (ipaddress costs 10 us a node at
    12,500 nodes), anything else by ipaddress."""
    addr, _, plen = cidr.partition("/")
    if ":" in addr or not plen.isdecimal() or int(plen) > 32:
        return str(ipaddress.ip_interface(cidr).network)
    bits = int(plen)
    net = int.from_bytes(socket.inet_aton(addr), "big") & (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF
    return f"{socket.inet_ntoa(net.to_bytes(4, 'big'))}/{bits}"


@check("NET001", Severity.ERROR, "NCCL_SOCKET_IFNAME matches no interface")
def nccl_ifname(job: Job) -> Iterator[Hit]:
    """NCCL_SOCKET_IFNAME selects at least one usable interface on every node of a GPU job, by
    NCCL's own matching (prefix, `=` exact, `^` exclude, `:` port suffix).

    NCCL fails at init with "Bootstrap : no socket interface found" (or picks nothing usable),
    on that node only, and the others hang waiting for it.

    Use a prefix present on every node (`eth`, `ens`, `=bond0`), or exclude what must not be
    used (`^docker,lo`) instead of naming one interface.
    """
    if not job.uses_gpus:
        return
    network = job.section("network")
    for err, members in job.by_node(lambda i: network[i]["nccl"]["error"]).items():
        yield Hit(
            str(err),
            members,
            expected="at least one interface",
            actual="none",
            fix="set NCCL_SOCKET_IFNAME to a prefix that exists on every node",
            verify=IP,
        )


@check("NET002", Severity.ERROR, "GLOO_SOCKET_IFNAME names a missing interface")
def gloo_ifname(job: Job) -> Iterator[Hit]:
    """Every interface named in GLOO_SOCKET_IFNAME exists with an address on the node (Gloo
    takes exact names, not prefixes or IP addresses).

    Gloo aborts when the process group is created: `Unable to find address for: <name>`. In a
    GPU job this only bites gloo groups (CPU collectives, TORCH_DISTRIBUTED_DEBUG=DETAIL).

    Name an interface that exists on every node, the same number of names everywhere.
    """
    network = job.section("network")
    for err, members in job.by_node(lambda i: network[i]["gloo"]["error"]).items():
        yield Hit(
            str(err),
            members,
            expected="existing interfaces",
            actual="missing",
            fix="set GLOO_SOCKET_IFNAME to interface names that exist on every node",
            severity=Severity.WARNING if job.uses_gpus else None,
            verify=IP,
        )


@check("NET003", Severity.ERROR, "Traffic would go over loopback")
def loopback_iface(job: Job) -> Iterator[Hit]:
    """In a job that spans hosts, the interface NCCL (GPU jobs) or Gloo (CPU jobs) would use is
    not loopback.

    Gloo binds to the address the hostname resolves to; with the hostname mapped to 127.0.1.1
    or 127.0.0.1 in /etc/hosts it binds loopback ("Using the loopback address as fallback") and
    peers cannot connect. NCCL falls back to `lo` only when nothing else is up.

    Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the cluster interface, or map the hostname to
    the node's routable address in /etc/hosts.
    """
    if not job.multi_node:
        return
    groups: dict[tuple[str, str], list[int]] = {}
    _, ifaces, addrs = _both(job)
    for i, (lib, _, rule) in _chosen_all(job).items():
        iface = ifaces[i]
        if (iface and iface["loopback"]) or is_loopback(addrs[i] or ""):
            groups.setdefault((lib, rule), []).extend(job.node_of(i))
    for (lib, rule), members in groups.items():
        var = "GLOO_SOCKET_IFNAME" if lib == "Gloo" else "NCCL_SOCKET_IFNAME"
        yield Hit(
            f"{lib} would use loopback ({rule})",
            members,
            expected="a routable interface",
            actual="lo",
            fix=f"set {var} to the cluster interface (e.g. {var}=eth0)",
            verify=IP,
        )


@check("NET004", Severity.WARNING, "NCCL would use a virtual interface")
def virtual_iface(job: Job) -> Iterator[Hit]:
    """The interface NCCL would use first is not a container bridge or other virtual device
    (docker*, veth*, virbr*, cni*, flannel*, tailscale*, ...).

    Virtual bridges carry an address no other node can reach: NCCL's bootstrap advertises it and
    peers time out connecting. NCCL's default only excludes docker, lo and virbr.

    Set NCCL_SOCKET_IFNAME to the cluster interface, or exclude the virtual ones
    (`NCCL_SOCKET_IFNAME=^docker,veth,cni,lo`).
    """
    if not job.uses_gpus:
        return
    groups: dict[tuple[str, str], list[int]] = {}
    ifaces = _chosen_ifaces(job)
    for i, (_, name, rule) in _chosen_all(job).items():
        iface = ifaces[i]
        if iface and iface["virtual"]:
            groups.setdefault((str(name), rule), []).extend(job.node_of(i))
    for (name, rule), members in groups.items():
        fallback = "nothing else found" in rule
        yield Hit(
            f"NCCL would use {name} ({rule})",
            members,
            expected="a physical interface",
            actual=name,
            fix="set NCCL_SOCKET_IFNAME to the cluster interface or exclude virtual ones",
            severity=Severity.ERROR if fallback and job.multi_node else None,
            verify=IP,
        )


@check("NET005", Severity.ERROR, "Chosen interface is down")
def iface_down(job: Job) -> Iterator[Hit]:
    """The interface NCCL or Gloo would use is up and running (carrier present).

    NCCL before 2.28 picks interfaces without checking IFF_RUNNING; Gloo binds a named interface
    regardless. A down link makes every connection to this node time out.

    Bring the link up (`ip link set IFACE up`, cable, switch port) or select another interface.
    """
    groups: dict[str, list[int]] = {}
    ifaces = _chosen_ifaces(job)
    for i, (lib, name, _) in _chosen_all(job).items():
        iface = ifaces[i]
        if iface and not iface["loopback"] and not (iface["up"] and iface["running"]):
            groups.setdefault(f"{lib} would use {name}, which is down", []).extend(job.node_of(i))
    for msg, members in groups.items():
        yield Hit(
            msg,
            members,
            expected="UP, LOWER_UP",
            actual="down",
            fix="bring the link up or choose another interface",
            verify=IP,
        )


def _subnet(addr: str | None, iface: Interface | None) -> str | None:
    """The subnet of a node's chosen address (``iface``: its chosen interface)."""
    if addr and "/" not in addr:  # Gloo's address is a bare IP: take the prefix from its interface
        ip = ipaddress.ip_address(addr.split("%", 1)[0])
        addr = next((c for c in iface["addrs"] if ipaddress.ip_interface(c).ip == ip), None) if iface else None
    if not addr:
        return None
    return _network(addr)


@check("NET006", Severity.WARNING, "Chosen interfaces are on different subnets")
def subnets(job: Job) -> Iterator[Hit]:
    """The interfaces NCCL/Gloo would use are on the same IP subnet on every node (peer
    majority).

    A node whose chosen interface is on another subnet is either using the wrong NIC (management
    network, IPoIB vs Ethernet) or needs routing that collective traffic rarely gets: expect
    timeouts or a much slower path.

    Pin the interface (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME) so every node uses the cluster
    network.
    """
    if not job.multi_node:
        return
    _, ifaces, addrs = _both(job)
    expected, groups = job.node_majority(lambda i: _subnet(addrs[i], ifaces[i]))
    for value, members in outliers(groups, expected):
        yield Hit(
            f"chosen interface on {value} while the other nodes are on {expected} ({describe(job, groups, by_host=True)})",
            members,
            expected=str(expected),
            actual=str(value),
            fix="pin NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to the cluster network",
            verify=IP,
        )


@check("NET007", Severity.INFO, "Chosen interface name differs across nodes")
def iface_names(job: Job) -> Iterator[Hit]:
    """NCCL/Gloo pick an interface of the same name on every node (peer majority).

    Not a failure by itself, but a single exact setting (`NCCL_SOCKET_IFNAME==eth0`) will break
    on the odd nodes, and different names often mean a different NIC type or driver.

    Use a prefix that covers all names, or rename interfaces consistently (udev/netplan).
    """
    if not job.multi_node:
        return
    expected, groups = job.node_majority(lambda i: _chosen(job, i)[1])
    for value, who in outliers(groups, expected):
        yield Hit(
            f"uses {value} where the other nodes use {expected}",
            who,
            expected=str(expected),
            actual=str(value),
            fix="use an interface prefix that matches every node",
            verify=IP,
        )


@check("NET008", Severity.WARNING, "MTU differs on the chosen interface")
def mtu(job: Job) -> Iterator[Hit]:
    """The chosen interface has the same MTU on every node (peer majority).

    Mismatched MTUs (9000 vs 1500) let small packets through and drop large ones: rendezvous
    succeeds and the first big collective hangs.

    Set the same MTU on all nodes and on the switch ports.
    """
    if not job.multi_node:
        return

    def key(i: int) -> int | None:
        iface = _chosen_iface(job, i)
        return iface["mtu"] if iface and not iface["loopback"] else None

    expected, groups = job.node_majority(key)
    for value, members in outliers(groups, expected):
        yield Hit(
            f"MTU {value} where the other nodes use {expected}",
            members,
            expected=str(expected),
            actual=str(value),
            fix="set the same MTU on every node",
            verify=IP,
        )


CODES: dict[str, Check] = table(
    nccl_ifname, gloo_ifname, loopback_iface, virtual_iface, iface_down, subnets, iface_names, mtu
)
