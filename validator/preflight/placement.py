"""Where c10d will put each node: the node ranks torchrun's dynamic rendezvous (c10d, etcd-v2)
assigns, predicted before it runs.

Each torchrun agent joins as ``_NodeDesc(local_addr or socket.getfqdn(), os.getpid(), local_id)``
(``_NodeDescGenerator.generate``; local_id 0: the agent's only handler), and the rendezvous,
once complete, numbers its participants in their sorted order (``_mark_rendezvous_complete``:
``for rank, node in enumerate(sorted(state.participants))``): RULE. The wrapper execs torchrun in
place, so the agent's pid is this participant's: every node sends the address torch will use
(ADDR_ENV, computed here the way torch does it, but bounded) and the coordinator sorts. Where that
cannot hold, the placement is unknown, with one line saying why (``predict``).
"""

from __future__ import annotations

from validator.facts.node import major_minor

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts
    from validator.preflight.plan import Plan

RULE = "nodes sorted by (fqdn or --local-addr, agent pid): torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:833 in torch 2.13"
SOURCE = f"predicted: {RULE}"  # a placed node's launch source of its node rank (the report's layout.placement)
BACKENDS = ("c10d", "etcd-v2")  # DynamicRendezvousHandler (rendezvous/registry.py); etcd (v1) ranks by arrival
TORCH = ((2, 0), (2, 13))  # the versions whose dynamic_rendezvous.py was read for RULE (2.13: line 833)
ADDR_ENV = "VALIDATOR_C10D_ADDR"  # in a participant's facts: the address its agent will join with ("": unknown)
FQDN_S = 2.0  # socket.getfqdn() waits on DNS without a bound (an unreachable resolver: 5 s a query)
ADDR_MAX = 255


def applies(p: Plan, launch: Any) -> bool:
    """One torchrun wrapper a node whose node ranks the dynamic rendezvous assigns."""
    return p.mode == "node" and not p.keyed and launch["rdzv_backend"] in BACKENDS


def tool(launch: Any) -> str | None:
    """The wrapped command's launcher (torchrun itself: `torchrun`, `python -m torch.distributed.run`)."""
    return launch["command"]["tool"] if launch["command"] else None


def unpredictable(p: Plan, facts: Facts) -> str | None:
    """Why this participant's launch alone rules the prediction out, or None."""
    launch = facts["launch"]
    backend = launch["rdzv_backend"]
    if backend not in BACKENDS:
        return f"--rdzv-backend={backend} does not number nodes in sorted order (only {', '.join(BACKENDS)} do)"
    if tool(launch) != "torchrun":
        return "the wrapped command is not torchrun itself (a shell or wrapper may fork: the agent's pid is unknown)"
    if p.minimum < p.expected:
        return (f"--nnodes={p.minimum}:{p.expected}: which nodes make the first round, and so their ranks, is "
                "decided by arrival and the last call")  # fmt: skip
    return None


def fqdn(limit: float = FQDN_S) -> str | None:
    """socket.getfqdn(), as torch calls it, in a thread given ``limit`` seconds: None if it stalls."""
    import socket
    import threading

    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(socket.getfqdn()), daemon=True)
    t.start()
    t.join(limit)
    return box[0] if box else None


def record_addr(facts: Facts) -> None:
    """Put the address this node's agent will join with into its facts (ADDR_ENV): --local-addr
    (or PET_LOCAL_ADDR, torchrun's env fallback), else socket.getfqdn(); "" when that stalls."""
    cmd = facts["launch"]["command"]
    options = cmd["options"] if cmd else {}
    addr = options.get("local_addr") or facts["env"].get("PET_LOCAL_ADDR") or fqdn()
    facts["env"][ADDR_ENV] = addr or ""


def predict(arrived: list[Facts], p: Plan) -> tuple[list[Facts] | None, str]:
    """The nodes in the node-rank order torch will give them, or (None, why not) in one line."""
    if len(arrived) != p.expected:
        return None, f"{len(arrived)} of {p.expected} nodes arrived"
    keys: dict[tuple[str, int, int], Facts] = {}
    for f in arrived:
        why = unpredictable(p, f)
        if why:
            return None, f"{f['host']}: {why}"
        v = major_minor(f["software"]["torch"])
        if v is None or not TORCH[0] <= v <= TORCH[1]:
            low, high = (".".join(map(str, t)) for t in TORCH)
            return None, (f"{f['host']} has torch {f['software']['torch'] or 'not installed'}: the rule is read from "
                          f"torch {low}-{high}'s dynamic_rendezvous.py")  # fmt: skip
        addr = f["env"].get(ADDR_ENV)
        if not isinstance(addr, str) or not addr or len(addr) > ADDR_MAX:
            what = "did not send it" if addr is None else f"socket.getfqdn() did not answer within {FQDN_S:g} s"
            return None, f"{f['host']}: the address its torchrun will join with is unknown ({what})"
        key = (addr, f["pid"], 0)
        if key in keys:
            return None, (f"{f['host']} and {keys[key]['host']} both join as {addr} pid {f['pid']}: torch would "
                          "count them as one node")  # fmt: skip
        keys[key] = f
    return [keys[k] for k in sorted(keys)], ""


def placed(order: list[Facts]) -> list[Facts]:
    """Copies of ``order`` with the node rank each will get, its source naming the rule."""
    return [
        {
            **f,
            "launch": {**f["launch"], "node_rank": i, "sources": {**f["launch"]["sources"], "node_rank": SOURCE}},
        }
        for i, f in enumerate(order)
    ]


def note(order: list[Facts]) -> str:
    """The report's line: the placement predicted and where the rule comes from."""
    shown = ", ".join(f"{f['host']} pid {f['pid']} -> {i}" for i, f in enumerate(order[:8]))
    more = f", ... ({len(order)} nodes)" if len(order) > 8 else ""
    return f"node ranks predicted from torch's c10d rank assignment ({RULE}): {shown}{more}"


def wire_doc(order: list[Facts] | None, why: str) -> dict[str, Any]:
    """What the verdict tells every node with --groups: the nodes in node-rank order, or why not."""
    return {"nodes": [[f["host"], f["pid"]] for f in order]} if order is not None else {"unknown": why}


def mine(doc: object, facts: Facts, expected: int) -> int | str:
    """This node's predicted node rank from the verdict's placement (untrusted), or why there is none."""
    if not isinstance(doc, dict):
        return "the coordinator sent no placement (it runs without --groups, or an older validator)"
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        why = doc.get("unknown")
        return why[:300] if isinstance(why, str) else "the coordinator's placement is malformed"
    me = [facts["host"], facts["pid"]]
    at = [i for i, n in enumerate(nodes) if n == me]
    if len(nodes) != expected or len(at) != 1:
        return f"this node ({facts['host']} pid {facts['pid']}) is not once among the {len(nodes)} placed"
    return at[0]
