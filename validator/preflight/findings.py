"""PRE: findings of the preflight rendezvous itself (not checks over facts): their codes, and
``finding`` that the preflight makes them with."""

from __future__ import annotations

from validator.codes import Code, code, table
from validator.model import Finding, Severity

unreachable = code(
    "PRE001",
    Severity.ERROR,
    "Coordinator unreachable",
    """A participant reached the preflight coordinator (the master's MASTER_ADDR:MASTER_PORT, or
    --coordinator) before the deadline.

    The real job would hang in the same place: the rendezvous store on the master is either not
    up (the master node never started, or started late), not reachable from this node (firewall,
    routing, wrong interface), or the name does not resolve here. The finding lists what was
    tried and what each name resolved to.

    Check that the master node runs the preflight too, that MASTER_ADDR resolves to it from this
    node (`getent ahosts MASTER_ADDR`) and that the port is open between the nodes (`nc -zv
    MASTER_ADDR MASTER_PORT` while the preflight waits).
    """,
)


foreign = code(
    "PRE002",
    Severity.ERROR,
    "Rendezvous port held by another program",
    """Whatever listens on the rendezvous port on the master is the preflight coordinator of
    this job.

    Something else answers there: a stale job's TCPStore or another service. The real job's
    rank 0 would fail to bind it (EADDRINUSE), and the other ranks might talk to the stale store.

    Stop the process named on the master (the coordinator's own report names its pid), or use
    another MASTER_PORT for the whole job.
    """,
)


rejected = code(
    "PRE003",
    Severity.ERROR,
    "Rejected by the coordinator",
    """The coordinator accepted this participant's facts.

    It refuses participants of another job (a different SLURM_JOB_ID, rdzv id or --job-id), a
    wrong or missing HMAC when VALIDATOR_SECRET is set, and facts it cannot validate. Two jobs
    configured with the same MASTER_ADDR:MASTER_PORT would collide the same way. A coordinator at
    its connection limit or memory budget refuses with that reason too (a flood on the port):
    the participant retries until its deadline.

    Give every participant the same job identity and secret (export them in the job script), or
    move one of the jobs to another port; for a flood, find its source in the coordinator's PRE004.
    """,
)


strangers = code(
    "PRE004",
    Severity.INFO,
    "Connections refused by the coordinator",
    """The coordinator saw no connection that it had to refuse or drop (another job, bad MAC,
    garbage, oversized or deeply nested frames, idle or slow connections, a connection claiming a
    registered participant's identity, a flood at the connection limit or the memory budget).

    Refused connections never change the verdict, at any --fail-on: this finding is information
    only. It shows that something else on the network talks to this job's rendezvous port:
    another job with the same MASTER_ADDR:PORT, a scanner, a flood, or a participant with the
    wrong secret. Each reason is one finding with a count, a few peers and one short example.

    Look at the peers listed; give colliding jobs distinct ports; set VALIDATOR_SECRET where the
    port is reachable from untrusted hosts.
    """,
)


net_pair = code(
    "PRE005",
    Severity.ERROR,
    "Network check: peers cannot reach each other (retired: NET101)",
    """Retired: `validator preflight --net-check` reports an unreachable pair as NET101 now, as
    `validator scan --net-check` always did (one net check for both). PRE005 is no longer emitted;
    the code keeps this meaning and is never reused.

    It meant: with --net-check, a node's ring neighbour or the master could not connect to the
    address NCCL (or Gloo) would use on that node, which hangs the first collective.

    See NET101 (`validator explain NET101`); rules that select or ignore PRE005 should name NET101.
    """,
)


smoke = code(
    "PRE006",
    Severity.ERROR,
    "Smoke all_reduce failed",
    """With --smoke, a tiny all_reduce over all participants (gloo, or NCCL where GPUs exist)
    completes with the right sum within its timeout.

    This is the real communication stack end to end; a failure here is a failure of the job's
    first collective.

    Read the error; run `validator diagnose` on the preflight's log for a classification.
    """,
)


cannot_bind = code(
    "PRE007",
    Severity.ERROR,
    "Cannot listen on the rendezvous port",
    """The master can listen on the rendezvous port (apart from it being in use, which RDZ006
    reports with the owner).

    A port below 1024 needs privileges (EACCES), and an address that is not local cannot be
    bound (EADDRNOTAVAIL): the job's TCPStore would fail the same way.

    Use a port in 1024-65535 and a MASTER_ADDR that belongs to the master node.
    """,
)


CODES: dict[str, Code] = table(unreachable, foreign, rejected, strangers, net_pair, smoke, cannot_bind)


def finding(code: str, message: str, hosts: list[str], ranks: list[int] | None = None, **kw: str | None) -> Finding:
    c = CODES[code]
    return c.finding(message, ranks=ranks or [], hosts=hosts, expected=kw.get("expected"), actual=kw.get("actual"),
                     fix=kw.get("fix") or c.fix, verify=kw.get("verify") or "")  # fmt: skip
