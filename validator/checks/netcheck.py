"""NET1xx: findings of `validator scan --net-check`, which listens on each node's chosen address
and connects to it from the node's ring neighbour and from the first node.

These are not checks over facts (the facts cannot tell whether packets get through): the scan
pipeline runs the probes and ``findings`` turns their results into findings of the codes below.
"""

from __future__ import annotations

from typing import Any

from validator.codes import Code, code, table
from validator.model import Finding, Severity
from validator.targets import fold_hosts

VERIFY = "nc -zv ADDR PORT   # from the named source node, while `nc -l ADDR PORT` runs on the destination"


unreachable_pair = code(
    "NET101",
    Severity.ERROR,
    "Node unreachable on the address NCCL would use",
    """A TCP connection from the node's ring neighbour (and from the first node) to a listener on
    the address NCCL (GPU jobs) or Gloo (CPU jobs) would use on that node gets through, and
    reaches that listener.

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


CODES: dict[str, Code] = table(unreachable_pair, cannot_listen, not_checked)


def _finding(chk: Code, message: str, hosts: list[str], expected: str, actual: str, fix: str) -> Finding:
    return chk.finding(message, hosts=hosts, expected=expected, actual=actual, fix=fix, verify=VERIFY)


def findings(
    addrs: dict[str, str],
    listening: dict[str, dict[str, Any]],
    plans: dict[str, list[list[Any]]],
    results: dict[str, list[dict[str, Any]] | str],
) -> list[Finding]:
    """Findings from the net check: ``addrs`` host -> chosen address; ``listening`` host ->
    {"port", "token"} or {"error", "bind"}; ``plans`` prober -> [[dest, addr, port, token]];
    ``results`` prober -> [{"label", "ok", "error"}] or why the prober did not run."""
    out: list[Finding] = []
    not_run: dict[str, list[str]] = {}
    for host, info in listening.items():
        if "error" not in info:
            continue
        if info.get("bind"):
            out.append(
                _finding(
                    cannot_listen,
                    f"cannot listen on {addrs.get(host)}: {info['error']}",
                    [host],
                    "a bindable address",
                    str(info["error"]),
                    "make sure the chosen interface has this address, or pin NCCL_SOCKET_IFNAME",
                )
            )
        else:
            not_run.setdefault(f"listener: {info['error']}", []).append(host)
    failed: dict[str, list[tuple[str, str]]] = {}  # destination -> [(source, error)]
    probed_from: dict[str, set[str]] = {}
    for source, res in results.items():
        if isinstance(res, str):
            not_run.setdefault(f"prober: {res}", []).append(source)
            continue
        for r in res:
            dest = str(r.get("label"))
            probed_from.setdefault(dest, set()).add(source)
            if not r.get("ok"):
                failed.setdefault(dest, []).append((source, str(r.get("error"))))
    for dest, fails in failed.items():
        sources = [s for s, _ in fails]
        everyone = set(sources) >= probed_from.get(dest, set())
        pairs = ", ".join(f"{s} -> {dest}" for s in sources)
        out.append(
            _finding(
                unreachable_pair,
                f"{dest} ({addrs.get(dest)}) cannot be reached: {pairs}: {fails[0][1]}"
                + ("" if everyone else " (other nodes get through: look at the named source's routes and firewall)"),
                [dest] if everyone else [*sources, dest],
                "connects from every peer",
                f"unreachable from {fold_hosts(sources)}",
                "open the ports between the nodes, fix the route, or pin NCCL_SOCKET_IFNAME to the cluster interface",
            )
        )
    for why, hosts in not_run.items():
        out.append(
            _finding(
                not_checked,
                why,
                sorted(set(hosts)),
                "listener and prober ran",
                why.split(":", 1)[0] + " failed",
                "rerun with --net-check; check the node's load and sshd MaxSessions",
            )
        )
    return out
