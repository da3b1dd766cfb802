"""PRE: findings of the preflight rendezvous itself (not checks over facts), and NET201-203, the
names each node resolves for its peers (preflight/peers.py): their codes, and ``finding`` that
the preflight makes them with."""

from __future__ import annotations

from validator.codes import Code, code, table
from validator.model import Severity

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
    hint="start the master's preflight, make MASTER_ADDR resolve to it here, open the port between the nodes",
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
    hint="stop the program holding the port on the master, or use another MASTER_PORT for the whole job",
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
    hint="give every participant of the job the same job id (--job-id, SLURM_JOB_ID) and secret",
)


strangers = code(
    "PRE004",
    Severity.INFO,
    "Connections refused by the coordinator",
    """The coordinator saw no connection that it had to refuse or drop (another job, bad MAC,
    garbage, oversized or deeply nested frames, idle, slow or silent connections, a connection
    claiming a registered participant's identity, a flood at the connection limit or the memory
    budget).

    Refused connections never change the verdict, at any --fail-on: this finding is information
    only (a flood still going on when the verdict is due is PRE009, an error). It shows that
    something else on the network talks to this job's rendezvous port: another job with the same
    MASTER_ADDR:PORT, a scanner, a flood, or a participant with the wrong secret. Each reason is one finding with a count, a few peers and one short example.

    Look at the peers listed; give colliding jobs distinct ports; set VALIDATOR_SECRET where the
    port is reachable from untrusted hosts.
    """,
    hint="nothing, unless they keep coming: then find the named hosts",
)


net_pair = code(
    "PRE005",
    Severity.ERROR,
    "Network check: peers cannot reach each other",
    """Retired: `validator preflight --net-check` reports an unreachable pair as NET101 now, as
    `validator scan --net-check` always did (one net check for both). PRE005 is no longer emitted;
    the code keeps this meaning and is never reused.

    It meant: with --net-check, a node's ring neighbour or the master could not connect to the
    address NCCL (or Gloo) would use on that node, which hangs the first collective.

    See NET101 (`validator explain NET101`); rules that select or ignore PRE005 should name NET101.
    """,
    successor="NET101",
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
    hint="free the port on this node, or use another MASTER_PORT for the whole job",
)


own_loopback = code(
    "NET201",
    Severity.ERROR,
    "Hostname resolves to loopback on its own node",
    """In a job that spans hosts, a node's own hostname does not resolve, on that node, to a
    loopback address (127.0.1.1, the Debian/Ubuntu default in /etc/hosts, or 127.0.0.1) while the
    node has a routable address. Measured by the preflight (two or more hosts).

    Gloo (and PyTorch's gloo groups in GPU jobs) binds the first address its hostname resolves
    to when GLOO_SOCKET_IFNAME is unset, and advertises it to its peers: they then connect to
    their own loopback ("connect [127.0.1.1]:port: Connection refused") or hang. The finding shows
    what the node resolves its name to, its routable address, and what its peers resolve it to.

    Map the hostname to the node's routable address in /etc/hosts (replace the 127.0.1.1 line),
    or set GLOO_SOCKET_IFNAME to the cluster interface on every node.
    """,
)


drift = code(
    "NET202",
    Severity.ERROR,
    "Peer hostname resolves differently on different nodes",
    """Every node resolves a peer's hostname to the same addresses, or at least to addresses
    the peer has. Measured by the preflight: each node resolves a sample of its peers' hostnames
    (its ring neighbours, the master, a few others).

    /etc/hosts that drifted (a node re-addressed, a stale copy on some nodes) sends torchrun's
    c10d store clients, ssh-based launchers and anything that connects by name to the wrong place
    (or to nothing) from some nodes only. The named nodes are those whose answer is neither one of
    the peer's own addresses nor what the others resolve; it is an error for the master's name
    under torchrun's c10d rendezvous (which hands every worker the store host's hostname), a
    warning otherwise (RDZ003 covers a MASTER_ADDR given by name).

    Make /etc/hosts (or DNS) the same on every node; the finding shows what each side resolved
    and which addresses the peer really has.
    """,
)


unresolved = code(
    "NET203",
    Severity.ERROR,
    "Peer hostname does not resolve on some nodes",
    """A peer's hostname that resolves on other nodes (to one of the peer's own addresses, on the
    master, or on most nodes) resolves on every node, within a second. Measured by the preflight
    on a sample of each node's peers. Names that no other node resolves either (pod names without
    a headless Service) are not reported.

    torchrun's c10d rendezvous hands the workers the store host's hostname, and ssh-based
    launchers connect by name: a node that cannot resolve it fails there ("Name or service not
    known") or stalls on DNS. An error for the master's name under c10d, a warning otherwise.

    Add the missing names to /etc/hosts on the named nodes, or fix their resolver (`nsswitch.conf`,
    `resolv.conf`, the DNS search domain).
    """,
)


clock_skew = code(
    "PRE008",
    Severity.WARNING,
    "Clock differs from the coordinator's",
    """Each node's wall clock is within a second of the coordinator's, measured from the
    participant's clock in its facts header against the coordinator's clock on receipt, corrected
    by half the hello-to-header round trip (only offsets beyond that uncertainty count). When two
    or more other nodes agree on another time than the coordinator's, their median is the
    reference and the coordinator's own node is the one named.

    Timestamps of different nodes' logs cannot be lined up across a skew: `validator diagnose`
    orders events across ranks, and people read timelines of a hang. Skewed clocks also break
    certificate and token validity checks.

    Synchronize the clocks (chrony or systemd-timesyncd, `chronyc tracking`, `timedatectl`).
    """,
)


flood = code(
    "PRE009",
    Severity.ERROR,
    "Rendezvous port flooded when the job would start",
    """Connections that are not the job's (garbage, empty, another job's, a wrong secret) did not
    arrive at a flood's rate (50 or more within a second) when the verdict was due, nor during
    the 10 s the coordinator then waits for such a flood to stop.

    The job's own rendezvous store would take the same port a moment later and meet the flood.
    torch's TCPStore does not survive one: a static torchrun on loopback never started its
    workers under ~125 garbage connections a second for 4 s, nor after ~4,000 in 3 s, garbage or
    empty, and hung until killed (torch 2.13; docs/preflight.md, "A flood on the port"). A few
    connections, or a trickle such as a port scanner's, do no harm and are PRE004, information.

    Find the hosts named (the coordinator's PRE004 findings count what each sent) and stop them:
    a runaway client of an older job on the same port, a health check in a tight loop, a scanner.
    Or move the job to another MASTER_PORT, and set VALIDATOR_SECRET where strangers can reach it.
    """,
    hint="stop the named hosts, or move the job to another MASTER_PORT; set VALIDATOR_SECRET",
)


vanished = code(
    "PRE010",
    Severity.ERROR,
    "Participant vanished before the go",
    """Every participant counted in a passing verdict confirmed it before anyone started the job.
    A pass is decided in two phases: the coordinator proposes it, every participant (a node
    leader for each of its ranks) answers that it is still there, and only then does the
    coordinator say go; no participant execs its command, or exits 0, without the go.

    A rank that sent its facts and then died (killed, out of memory, its node lost) or stopped
    (SIGSTOP, a hung node) would be counted as present, and the others would start the job and
    hang in `init_process_group` waiting for it. The finding names its rank and host, and whether
    its connection closed (it died) or it only stayed silent for the confirmation window (10 s).

    Look at what happened to that rank on its host (`dmesg`, the launcher's log, `sacct` or
    `kubectl describe pod`), fix or exclude the node, and start the job again.
    """,
    hint="look at what happened to the named rank on its host; fix or exclude the node and start again",
)


groups_failed = code(
    "PRE011",
    Severity.ERROR,
    "Process group rehearsal failed",
    """With `validator preflight --groups` (after the verdict passed, before the job starts) or in
    `validator rehearse` (before the script runs), every rank created the process groups of the
    job's parallel layout (TP, CP, DP, PP, EP, in the framework's rank order: docs/layout.md) and
    ran an all_reduce in each of its groups within 10 s.

    A group whose collective fails or hangs here fails the same way at the job's first collective
    in that group, after it booked its GPUs and initialised NCCL: a rank that cannot reach its
    group's peers (an interface or firewall between two nodes of one group), a rank that died or
    hung, a layout the ranks disagree on. The message names the group's kind, its ranks and the
    rank and host that failed or never reported; nobody starts the job.

    Look at the named rank's host (its interfaces for that group's peers: NCCL_SOCKET_IFNAME,
    `validator scan --net-check`), or at why it died; rerun the preflight with `--groups`.
    """,
)


groups_slow = code(
    "PRE012",
    Severity.WARNING,
    "Slow rank or group in the process group rehearsal",
    """With `validator preflight --groups` or in `validator rehearse`, every rank reached each of its groups' collectives
    within 3x of its peers' median and 250 ms more, and each group's timed all_reduce (1 MiB) took
    less than 3x the median group of its kind and 50 ms more.

    A synchronous job runs at the pace of its slowest rank in every group: one late rank (a slow
    or overloaded node) holds its whole group back, and a slow group (a slow link between two of
    its nodes) holds back every step. Printed as a warning line by the ranks it names; the job
    still starts unless --fail-on warning.

    Check the named rank's node (other processes, CPU or GPU clocks, `nvidia-smi -q -d
    PERFORMANCE`) or the named group's links (`validator scan --net-check`), and exclude it.
    """,
)


CODES: dict[str, Code] = table(
    unreachable,
    foreign,
    rejected,
    strangers,
    net_pair,
    smoke,
    cannot_bind,
    own_loopback,
    drift,
    unresolved,
    clock_skew,
    flood,
    vanished,
    groups_failed,
    groups_slow,
)
