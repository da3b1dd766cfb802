"""IB: the RDMA ports NCCL would use (by its own NCCL_IB_HCA rules, validator/facts/ib.py) are
active, alike, and used the same way on every node.

Only GPU jobs, and only nodes whose facts carry an ``ib`` section (older agents do not). NCCL
decides per process which net it uses and which ports; nothing makes the ranks agree, so a node
that differs hangs or slows the whole job without a word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import NamedTuple

from validator.checks.base import Check, Hit, Job, check, outliers
from validator.codes import table
from validator.model import IbFacts, IbPort, Severity

VERIFY = (
    "ibstat; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET ...   # on each named host: 'NET/IB : Using [0]mlx5_0:1/IB'"
)


def _ib(job: Job, i: int) -> IbFacts | None:
    """The node's ib facts; None for a CPU job, and for documents built without validation that
    lack the section (validate_facts sets it null)."""
    return job.facts[i].get("ib") if job.uses_gpus else None


def _ports(ib: IbFacts) -> Iterator[IbPort]:
    for d in ib["devices"]:
        yield from d["ports"]


class Node(NamedTuple):
    ib: IbFacts
    used: list[IbPort]  # the ports NCCL would use
    down: list[IbPort]  # selected by NCCL_IB_HCA but not ACTIVE/LinkUp


def _nodes(job: Job) -> dict[int, Node]:
    """Node representative -> its ib facts and ports, in one pass over every node's ports (the
    checks share it: 12,500 nodes x 8 ports)."""

    def compute() -> dict[int, Node]:
        out: dict[int, Node] = {}
        for i in job.node_reps:
            ib = _ib(job, i)
            if ib is None:
                continue
            used, down = [], []
            for d in ib["devices"]:
                for p in d["ports"]:
                    if p["used"]:
                        used.append(p)
                    elif p["selected"] and not (p["state"] == "ACTIVE" and p["phys_state"] in (None, "LinkUp")):
                        down.append(p)
            out[i] = Node(ib, used, down)
        return out

    return job.memo("ib.nodes", compute)


def _list(names: list[str], limit: int = 8) -> str:
    return ",".join(names[:limit]) + (f",... ({len(names)})" if len(names) > limit else "")


@check("IB001", Severity.ERROR, "NCCL would use IB on some nodes and sockets on others")
def transport(job: Job) -> Iterator[Hit]:
    """Every node of a GPU job would run NCCL over the same network (InfiniBand/RoCE verbs, or
    TCP sockets), by NCCL's own choice: NCCL_NET, NCCL_IB_DISABLE, NCCL_IB_HCA and which RDMA
    ports are ACTIVE there (peer majority).

    Each rank picks its network alone and falls back to sockets silently when IB is disabled or
    finds no usable port ("NET/IB : No device found."); ranks on different networks cannot
    connect, and the job hangs in its first collective that crosses nodes.

    Set NCCL_IB_DISABLE / NCCL_NET / NCCL_IB_HCA the same way for every rank, and bring up or
    exclude the RDMA ports of the odd nodes.
    """
    if not job.multi_node:
        return

    nodes = _nodes(job)
    if not nodes:
        return

    def key(i: int) -> str | None:
        n = nodes.get(i)
        return n.ib["transport"] if n else None

    expected, groups = job.node_majority(key)
    if "IB" not in groups:
        return
    for value, members in outliers(groups, expected):
        rules = "; ".join(Counter(n.ib["rule"] for i in members if (n := nodes.get(i))))
        what = f"NCCL would fail ({rules})" if value == "none" else f"NCCL would use {value} ({rules})"
        yield Hit(
            f"{what} where the other nodes use {expected}",
            members,
            expected=str(expected),
            actual=str(value),
            fix="set NCCL_IB_DISABLE, NCCL_NET and NCCL_IB_HCA alike on every node; fix or exclude the odd ports",
            verify=VERIFY,
        )


@check("IB002", Severity.WARNING, "NCCL_IB_HCA selects no active RDMA port")
def hca_selects_nothing(job: Job) -> Iterator[Hit]:
    """NCCL_IB_HCA, read by NCCL's rules (`^` excludes, `=` exact names, otherwise prefixes,
    `:port` one port), matches at least one ACTIVE port on a node that has some.

    NCCL then finds "No device found" for IB and falls back to TCP sockets without an error:
    collectives run many times slower. With NCCL_NET=IB it fails instead ("Failed to
    initialize any NET plugin").

    Name HCAs that exist (`ibstat -l`), e.g. `NCCL_IB_HCA==mlx5_0,mlx5_1` for exact names, or a
    prefix such as `mlx5`.
    """
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, n in _nodes(job).items():
        ib = n.ib
        if ib["rule"].endswith("matches no active port"):
            active = [p["name"] for p in _ports(ib) if p["state"] == "ACTIVE"]
            msg = f"{ib['rule']} (active: {_list(active)}): " + (
                ib["error"] or "NCCL falls back to sockets ('NET/IB : No device found.')"
            )
            groups.setdefault((msg, ib["error"] is not None), []).extend(job.node_of(i))
    for (msg, fails), members in groups.items():
        yield Hit(
            msg,
            members,
            expected="at least one active port",
            actual="none",
            fix="set NCCL_IB_HCA to HCAs present on every node (`=` for exact names)",
            verify=VERIFY,
            severity=Severity.ERROR if fails else None,
        )


@check("IB003", Severity.ERROR, "NCCL would use a different set of RDMA ports")
def hca_set(job: Job) -> Iterator[Hit]:
    """On nodes that run NCCL over IB, NCCL would use the same RDMA ports (by name) as the peer
    majority.

    A different set (NCCL_IB_HCA set per node, a missing HCA, a renamed device) gives that node
    another number of rails than its peers: NCCL's rings and trees assume the same NICs
    everywhere, and mismatched sets hang or crawl (NVIDIA/nccl#1478, #2428). A different count
    is an error; the same count under other names a warning (cross-rail traffic).

    Give every node the same HCAs and the same NCCL_IB_HCA; a port that is only down is named by
    IB004.
    """
    if not job.multi_node:
        return

    nodes = _nodes(job)
    if not nodes:
        return

    def key(i: int) -> tuple[str, ...] | None:
        n = nodes.get(i)
        return tuple(n.ib["used"]) if n and n.ib["transport"] == "IB" else None

    expected, groups = job.node_majority(key)
    want = set(expected or ())

    def only_down(i: int) -> bool:
        """The node lacks only ports that are down there: IB004 names them."""
        n = nodes[job.node_of(i)[0]]
        return set(n.ib["used"]) <= want and want - set(n.ib["used"]) <= {p["name"] for p in n.down}

    for value, group in outliers(groups, expected):
        members = [m for rep in dict.fromkeys(job.node_of(m)[0] for m in group) if not only_down(rep)
                   for m in job.node_of(rep)]  # fmt: skip
        if not members:
            continue
        yield Hit(
            f"NCCL would use {_list(list(value))} ({len(value)}) where the other nodes use "
            f"{_list(list(expected or ()))} ({len(want)})",
            members,
            expected=_list(list(expected or ())),
            actual=_list(list(value)),
            fix="use the same HCAs and NCCL_IB_HCA on every node",
            verify=VERIFY,
            severity=Severity.WARNING if len(value) == len(want) else None,
        )


@check("IB004", Severity.WARNING, "Selected RDMA port is not active")
def port_down(job: Job) -> Iterator[Hit]:
    """Every RDMA port NCCL_IB_HCA names explicitly, or that the peer majority uses, is ACTIVE
    with physical state LinkUp on the node.

    NCCL silently skips ports that are not ACTIVE: the node runs with fewer rails than its
    peers (slower collectives, or hangs where the rings expect the same NICs everywhere).

    Bring the port up (cable, switch port, subnet manager: `ibstat`, `ibportstate`), or leave it
    out of NCCL_IB_HCA on every node.
    """
    peers: Counter[str] = Counter()
    count = 0
    for n in _nodes(job).values():
        if n.ib["transport"] == "IB":
            count += 1
            peers.update(n.ib["used"])
    groups: dict[str, list[int]] = {}
    for i, n in _nodes(job).items():
        hca = n.ib["hca"]
        if not n.down or n.ib["rule"].startswith(("NCCL_IB_DISABLE=", "NCCL_NET=")):
            continue  # IB is off by the settings here: its ports do not matter
        named = hca is not None and not hca.startswith("^") and hca.strip(",") != ""
        for p in n.down:
            if named or peers[p["name"]] * 2 > count:
                why = "named by NCCL_IB_HCA" if named else f"used on {peers[p['name']]} of {count} nodes"
                msg = f"{p['name']} is {p['state']}/{p['phys_state']} ({why}): NCCL skips it"
                groups.setdefault(msg, []).extend(job.node_of(i))
    for msg, members in groups.items():
        yield Hit(
            msg,
            members,
            expected="ACTIVE/LinkUp",
            actual=msg.split(" ", 2)[2].split(" (", 1)[0],
            fix="bring the port up, or leave it out of NCCL_IB_HCA everywhere",
            verify=VERIFY,
        )


@check("IB005", Severity.WARNING, "RDMA port rate or link layer differs from the other nodes")
def rate_link(job: Job) -> Iterator[Hit]:
    """The RDMA ports NCCL would use have the same link layer (InfiniBand or Ethernet/RoCE) and
    the same rates on every node (peer majority).

    A node on another link layer cannot connect to its peers (NCCL: "Remote device is
    incompatible with the local ... Try selecting NICs of only one link type using
    NCCL_IB_HCA"): an error. A port that trained at a lower rate (a bad cable, 4X HDR down to
    EDR or 1X) makes every collective through that node run at its speed.

    Reseat or replace the cable / transceiver of the slow port (`ibstat`, `mlxlink`), or select
    ports of one link type with NCCL_IB_HCA.
    """
    if not job.multi_node:
        return

    nodes = _nodes(job)
    if not nodes:
        return

    def ports(i: int) -> list[IbPort]:
        n = nodes.get(i)
        return n.used if n and n.ib["transport"] == "IB" else []

    def link(i: int) -> str | None:
        return "/".join(sorted({str(p["link_layer"]) for p in ports(i)})) or None

    expected, groups = job.node_majority(link)
    for value, members in outliers(groups, expected):
        yield Hit(
            f"NCCL would use {value} ports where the other nodes use {expected}: NCCL cannot connect them",
            members,
            expected=str(expected),
            actual=str(value),
            fix="select ports of one link type on every node with NCCL_IB_HCA",
            verify=VERIFY,
            severity=Severity.ERROR,
        )

    def rates(i: int) -> tuple[float, ...] | None:
        return tuple(sorted(p["rate_gbps"] for p in ports(i) if p["rate_gbps"] is not None)) or None

    want, groups_r = job.node_majority(rates)
    for _have, members in outliers(groups_r, want):
        top = max(want or (0.0,))
        slow = [f"{p['name']} {p['rate']}" for p in ports(members[0]) if (p["rate_gbps"] or top) < top]
        if not slow:
            continue  # fewer or faster ports, not slower ones: IB003 compares the sets
        yield Hit(
            f"{_list(slow)} where the other nodes' ports run at {top:g} Gb/sec",
            members,
            expected=f"{top:g} Gb/sec",
            actual=_list(slow),
            fix="reseat or replace the cable of the slow port; check it with `ibstat` / `mlxlink`",
            verify=VERIFY,
        )


@check("IB006", Severity.WARNING, "RoCE port without a GID NCCL can use")
def roce_gid(job: Job) -> Iterator[Hit]:
    """Every RoCE port NCCL would use has the GID NCCL will take: the slot NCCL_IB_GID_INDEX
    names is populated, or, unset, a RoCE v2 GID with an IPv4 address exists (NCCL's own choice,
    after NCCL_IB_ROCE_VERSION_NUM and NCCL_IB_ADDR_FAMILY).

    Without one NCCL takes GID 0, a link-local RoCE v1 address that does not cross a router:
    connections fail ("Call to ibv_modify_qp failed with error Network is unreachable") or hang.
    A fixed NCCL_IB_GID_INDEX that names an empty slot (pods see their GIDs at other indices,
    NVIDIA/nccl#1573) fails the same way: an error.

    Give the port's netdev an IPv4 address (`show_gids` lists the GIDs), or unset
    NCCL_IB_GID_INDEX so NCCL picks the RoCE v2 GID itself.
    """
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, n in _nodes(job).items():
        ib = n.ib
        if ib["transport"] != "IB":
            continue
        bad = [p for p in n.used if p["link_layer"] == "Ethernet" and p["gid_ok"] is False]
        if not bad:
            continue
        named = ib["gid_index"] is not None and ib["gid_index"] >= 0
        ports = _list([f"{p['name']} ({p['netdev'] or 'no netdev'})" for p in bad])
        msg = (
            f"NCCL_IB_GID_INDEX={ib['gid_index']} names no GID on {ports}"
            if named
            else f"no RoCE v2 GID with an IPv4 address on {ports}: NCCL falls back to GID 0 (link-local)"
        )
        groups.setdefault((msg, named), []).extend(job.node_of(i))
    for (msg, named), members in groups.items():
        yield Hit(
            msg,
            members,
            expected="a populated RoCE v2 GID",
            actual="none",
            fix="unset NCCL_IB_GID_INDEX, or give the RoCE netdev an IPv4 address",
            verify="show_gids   # on each named host",
            severity=Severity.ERROR if named else None,
        )


CODES: dict[str, Check] = table(transport, hca_selects_nothing, hca_set, port_down, rate_link, roce_gid)
