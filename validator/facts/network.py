"""Interfaces, and which of them NCCL and Gloo would use; how the master address resolves here.

NCCL's rules are NCCL's own (``src/misc/socket.cc::ncclFindInterfaces``, ``utils.cc::
{parseStringList,matchIfList}``; reference §2.1): ``^`` excludes, ``=`` matches exactly,
otherwise a prefix; entries split on ``:``; a value of length <= 1 is ignored; default order
``ib*``, then an interface on NCCL_COMM_ID's subnet, then anything but docker/lo/virbr, then
docker, lo, virbr. Since 2.28 only RUNNING interfaces are candidates and virbr is excluded.
"""

from __future__ import annotations

import ipaddress

from validator.agent.probe import is_loopback as is_loopback  # one rule; the agent imports nothing of ours
from validator.facts.gpu import gpu_evidence
from validator.facts.node import major_minor

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts, Interface, MasterFacts, Selection

# Kinds whose addresses other nodes cannot reach (container/VM bridges, tunnels, overlays). Not
# veth (a Kubernetes pod's eth0 is one), bond (the cluster NIC itself), macvlan/ipvlan (secondary
# pod networks on the physical segment): those carry job traffic by design.
VIRTUAL_KINDS = {
    "bridge",
    "vxlan",
    "tun",
    "tap",
    "dummy",
    "ifb",
    "wireguard",
    "geneve",
}
VIRTUAL_PREFIXES = (
    "docker",
    "veth",
    "virbr",
    "br-",
    "cni",
    "flannel",
    "cali",
    "tailscale",
    "vxlan",
    "kube-",
    "weave",
    "podman",
    "lxc",
    "tun",
    "tap",
    "zt",
    "wg",
    "dummy",
    "ifb",
)


def parse_interfaces(ip_addr: list[dict[str, Any]], sysfs: dict[str, dict[str, Any]]) -> list[Interface]:
    out: list[Interface] = []
    for link in ip_addr:
        name = str(link.get("ifname", ""))
        flags = set(link.get("flags") or [])
        sys = sysfs.get(name, {})
        addrs = [
            f"{a['local']}/{a.get('prefixlen', 128 if ':' in a['local'] else 32)}"
            for a in link.get("addr_info") or []
            if a.get("family") in ("inet", "inet6") and a.get("local")
        ]
        kind = link.get("kind") or sys.get("devtype")
        speed = sys.get("speed")
        mtu = link.get("mtu", sys.get("mtu"))
        out.append(
            {
                "name": name,
                "addrs": addrs,
                "up": "UP" in flags,
                "running": "LOWER_UP" in flags or "RUNNING" in flags or link.get("operstate") == "UP",
                "loopback": "LOOPBACK" in flags,
                "virtual": (kind in VIRTUAL_KINDS or name.startswith(VIRTUAL_PREFIXES)) and "LOOPBACK" not in flags,
                "kind": str(kind) if kind else None,
                "mtu": int(mtu) if mtu not in (None, "") else None,
                "speed_mbps": int(speed) if speed and str(speed).lstrip("-").isdecimal() and int(speed) > 0 else None,
            }
        )
    return out


def _ip(cidr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_interface(cidr).ip


def _candidate_addr(iface: Interface, family: str | None) -> str | None:
    """NCCL keeps the first usable address of an interface, skipping IPv6 loopback."""
    for cidr in iface["addrs"]:
        ip = _ip(cidr)
        if ip.version == 6 and ip.is_loopback:
            continue
        if (family == "AF_INET" and ip.version != 4) or (family == "AF_INET6" and ip.version != 6):
            continue
        return cidr
    return None


def parse_if_list(value: str) -> tuple[bool, bool, list[str]]:
    """NCCL's ``parseStringList``: (exclude, exact, prefixes)."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    prefixes = [entry.split(":", 1)[0] for entry in value.split(",") if entry]
    return exclude, exact, prefixes


def match_if_list(name: str, prefixes: list[str], exact: bool) -> bool:
    if not prefixes:
        return True  # an empty list matches everything (NCCL: "Make an exception for the case where no user list is defined")
    return any(name == p if exact else name.startswith(p) for p in prefixes)


def _nccl_ge(version: str | None, major: int, minor: int) -> bool:
    v = major_minor(version)
    return v is None or v >= (major, minor)  # unknown: assume a current NCCL


def nccl_select(interfaces: list[Interface], env: dict[str, str], nccl_version: str | None) -> Selection:
    family = env.get("NCCL_SOCKET_FAMILY")
    family = family if family in ("AF_INET", "AF_INET6") else None
    need_running = _nccl_ge(nccl_version, 2, 28)

    def find(prefixes: list[str], exclude: bool, exact: bool) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for iface in interfaces:
            if need_running and not iface["running"]:
                continue
            addr = _candidate_addr(iface, family)
            if addr is None or match_if_list(iface["name"], prefixes, exact) == exclude:
                continue
            if iface["name"] not in (n for n, _ in found):
                found.append((iface["name"], addr))
        # getifaddrs lists every IPv4 address before any IPv6 one: an interface whose first
        # usable address is IPv6 comes after all IPv4 interfaces (stable sort keeps link order)
        return sorted(found, key=lambda f: ":" in f[1])

    def result(found: list[tuple[str, str]], rule: str, error: str | None = None) -> Selection:
        return {"ifaces": [n for n, _ in found], "addr": found[0][1] if found else None, "rule": rule, "error": error}

    user = env.get("NCCL_SOCKET_IFNAME", "")
    if len(user) > 1:
        exclude, exact, prefixes = parse_if_list(user)
        found = find(prefixes, exclude, exact)
        err = (
            None
            if found
            else f"NCCL_SOCKET_IFNAME={user} matches no usable interface: NCCL fails with 'Bootstrap : no socket interface found'"
        )
        return result(found, f"NCCL_SOCKET_IFNAME={user}", err)
    found = find(["ib"], False, False)
    if found:
        return result(found, "default: ib* first")
    comm_id = env.get("NCCL_COMM_ID", "")
    if comm_id:
        host = comm_id.rsplit(":", 1)[0].strip("[]")
        try:
            target = ipaddress.ip_address(host)
            same = [(n, a) for n, a in find([], False, False) if target in ipaddress.ip_interface(a).network]
            if same:
                return result(same[:1], f"default: same subnet as NCCL_COMM_ID={comm_id}")
        except ValueError:
            pass  # a hostname: NCCL resolves it; the subnet step cannot be predicted here
    default_excl = ["docker", "lo", "virbr"] if _nccl_ge(nccl_version, 2, 28) else ["docker", "lo"]
    steps = [
        (default_excl, True, "default: not " + "/".join(default_excl)),
        (["docker"], False, "default: docker* (nothing else found)"),
        (["lo"], False, "default: lo (nothing else found)"),
        (["virbr"], False, "default: virbr* (nothing else found)"),
    ]
    for prefixes, exclude, rule in steps:
        found = find(prefixes, exclude, False)
        if found:
            return result(found, rule)
    return result(
        [],
        "default",
        "no interface with an IP address: NCCL fails with 'Bootstrap : no socket interface found'",
    )


def uses_nccl(facts: list[Facts], gpus_per_node: int | None = None) -> bool:
    """The job communicates over NCCL (a GPU job) when there is evidence that it uses GPUs
    (``facts.gpu.gpu_evidence``: a node's GPUs or driver, a profile's GPUs per node, a launch
    command naming nccl), never by environment variables alone; otherwise over Gloo. The one rule
    for the checks, the scan's and the preflight's net check."""
    return gpu_evidence(facts, gpus_per_node) is not None


def chosen(facts: Facts, nccl: bool) -> tuple[str | None, str | None]:
    """(address without prefix, interface) that NCCL (``nccl``) or Gloo would use on this node."""
    sel = facts["network"]["nccl" if nccl else "gloo"]
    addr = sel["addr"]
    return (addr.split("/", 1)[0] if addr else None), next(iter(sel["ifaces"]), None)


def gloo_select(
    interfaces: list[Interface], env: dict[str, str], hostname: str, hostname_addrs: list[str]
) -> Selection:
    """Gloo: GLOO_SOCKET_IFNAME names interfaces exactly; unset, the hostname's address."""
    by_name = {i["name"]: i for i in interfaces}
    user = env.get("GLOO_SOCKET_IFNAME", "")
    if user:
        names = [n.strip() for n in user.split(",") if n.strip()]
        missing = [n for n in names if n not in by_name or _candidate_addr(by_name[n], None) is None]
        first = by_name.get(names[0]) if names else None
        addr = _candidate_addr(first, None) if first else None
        err = (
            f"GLOO_SOCKET_IFNAME={user}: no interface with an address named {', '.join(missing)} (Gloo: 'Unable to find address for: {missing[0]}')"
            if missing
            else None
        )
        return {"ifaces": names, "addr": addr, "rule": f"GLOO_SOCKET_IFNAME={user}", "error": err}
    # ProcessGroupGloo::createDefaultDevice: the first address of the hostname that can be bound
    # (one of ours), else loopback with "Unable to resolve hostname to a (local) address"
    for addr in hostname_addrs:
        iface = interface_of(interfaces, addr)
        if iface:
            return {"ifaces": [iface], "addr": addr, "rule": f"hostname {hostname} -> {addr}", "error": None}
    why = "does not resolve" if not hostname_addrs else f"resolves to {', '.join(hostname_addrs)}, not a local address"
    return {
        "ifaces": [next((i["name"] for i in interfaces if i["loopback"]), "lo")],
        "addr": "127.0.0.1",
        "rule": f"hostname {hostname} {why}: loopback fallback",
        "error": None,
    }


def interface_of(interfaces: list[Interface], addr: str) -> str | None:
    try:
        ip = ipaddress.ip_address(addr.split("%", 1)[0])
    except ValueError:
        return None
    for iface in interfaces:
        if any(_ip(c) == ip for c in iface["addrs"]):
            return iface["name"]
    if ip.is_loopback:
        return next((i["name"] for i in interfaces if i["loopback"]), None)
    return None


def master_facts(
    addr: str | None,
    port: int | None,
    resolved: dict[str, Any],
    routes: dict[str, Any],
    port_probe: dict[str, Any] | None,
    interfaces: list[Interface],
) -> MasterFacts | None:
    if not addr:
        return None
    res = resolved.get(addr)
    if res is None:
        addrs: list[str] = []
        error: str | None = "not resolved by the agent"
    else:
        addrs, error = list(res.get("addrs", [])), res.get("error")
    first = addrs[0] if addrs else None
    route = routes.get(first) if first else None
    src = route if isinstance(route, str) else None
    probe = port_probe if port_probe and port_probe.get("port") == port else None
    return {
        "addr": addr,
        "resolved": addrs,
        "error": error,
        "loopback": bool(addrs) and all(is_loopback(a) for a in addrs),
        "local": any(interface_of(interfaces, a) for a in addrs if not is_loopback(a))
        or (bool(addrs) and is_loopback(addrs[0])),
        "route_dev": interface_of(interfaces, src) if src else None,
        "route_src": src,
        "port": port,
        "port_free": probe.get("free") if probe else None,
        "port_owner": probe.get("owner") if probe else None,
    }
