"""NET1xx: findings of the net check (`validator scan --net-check`, `validator preflight
--net-check`), which listens on each node's chosen address, connects
and measures along two rings (validator/netcheck/).

These are not checks over facts (the facts cannot tell whether packets get through): the net
check runs the probes and ``validator.netcheck.verdict`` turns their results into findings. The
``Code`` records below carry the codes' documentation for `validator explain` and docs/checks/.
"""

from __future__ import annotations

from validator.codes import Code, code, table
from validator.model import Severity

VERIFY = "nc -zv ADDR PORT   # from the named source node, while `nc -l ADDR PORT` runs on the destination"


unreachable_pair = code(
    "NET101",
    Severity.ERROR,
    "Node unreachable on the address NCCL would use",
    """A TCP connection from the node's neighbours on two rings (and from the others to the first
    node) to a listener on the address NCCL (GPU jobs) or Gloo (CPU jobs) would use on that node
    gets through, and reaches that listener. (`validator preflight --net-check` reported this as
    PRE005 in 0.1.0; PRE005 is retired in favour of NET101.)

    NCCL's bootstrap and ring connect every rank to its neighbours over these addresses; a
    firewall, a missing route, a wrong subnet or an address that only exists inside a container
    bridge makes the job hang in its first collective, with nothing pointing at the pair.

    Open the port range between the nodes (firewall, security groups), fix the route, or make
    NCCL use the cluster interface (NCCL_SOCKET_IFNAME).
    """,
)


cannot_listen = code(
    "NET102",
    Severity.ERROR,
    "Cannot listen on the address NCCL would use",
    """A process on the node can bind a TCP port on the address NCCL or Gloo would use there.

    NCCL and Gloo listen on that address for their peers; when it cannot be bound (the address is
    not configured on the node, or is being removed) the node's ranks fail at init.

    Check the interface and address (`ip addr`), and which one NCCL picks
    (`NCCL_DEBUG=INFO` prints `NET/Socket : Using ...`).
    """,
)


not_checked = code(
    "NET103",
    Severity.WARNING,
    "Net check did not run on a node",
    """The net check's listener and prober ran on every node that answered the scan.

    Where they could not run (python3 stopped, the SSH session closed, a timeout) the node's
    reachability is unknown, which the other results cannot make up for.

    Rerun the scan with --net-check; look at the named node's load and SSH limits (MaxSessions).
    """,
)


slow_link = code(
    "NET104",
    Severity.WARNING,
    "Slow or lossy link between two nodes",
    """Each measured link (a node and its neighbours on two rings, over the address NCCL or Gloo
    would use) is within 3x of the median link in latency (a low percentile of 9 small round
    trips; and within 1 ms of it) and in throughput each way (up to 4 MB, at most 0.5 s per
    direction, the second-fastest quarter; or above 5,000 Mbit/s), and loses no more than 1% of
    its segments. A link that is not is a suspect: each of its nodes is paired with a known-good
    node (one whose ring links were all fine) and the link is measured again, twice, beside
    control pairs of known-good nodes. It is named only when it is slow every time, the same way,
    while both its nodes are fine with their known-good partners: a bad link, not a bad node.

    A collective runs at the pace of its slowest link: one degraded cable, a port negotiated
    down, a congested uplink or a mis-set MTU slows every step of the job, with nothing in
    its logs. The finding gives the link's figures and the median.

    Look at both ends' interface counters (`ip -s link`, `ethtool -S`) and the switch port; rerun
    the net check after reseating or replacing the cable.
    """,
)


slow_node = code(
    "NET105",
    Severity.WARNING,
    "Slow node: slow with every known-good peer",
    """No node is slow or lossy (by NET104's measure) with every known-good node it is paired
    with. A node with a slow link on its rings (two neighbours on each of two rings) is paired
    with a known-good node (one whose ring links were all fine), another one each time, twice,
    beside control pairs of known-good nodes; slow with each, the same way, it is the node.

    When a node is slow whichever peer it talks to, the node is the cause (its NIC, its driver,
    its CPU under load, a rate limit on its port), not one cable: every collective of the job
    waits for it. Its slow ring links are explained by it and not named. The finding gives the
    node's figures with each partner and the median.

    Drain the node, or look at its NIC (`ethtool`, `ip -s link`), its load and its port's
    configuration; rerun the net check.
    """,
)


CODES: dict[str, Code] = table(unreachable_pair, cannot_listen, not_checked, slow_link, slow_node)
