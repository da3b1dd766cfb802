"""SYS: node limits that break NCCL or the rendezvous store at scale."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from validator.checks.base import Check, Hit, Job, check, indices
from validator.codes import table
from validator.model import Severity

MIN_SHM = 256 << 20  # a launch profile's min_shm_mib replaces it


@check("SYS001", Severity.ERROR, "/dev/shm too small for NCCL")
def shm(job: Job) -> Iterator[Hit]:
    """/dev/shm has at least 256 MiB (or the profile's `min_shm_mib`) on nodes of a GPU job that
    run several ranks (`node-check`: on GPU nodes, and on any node whose profile pins the size).

    NCCL's shared-memory transport between ranks of one node allocates its buffers in /dev/shm;
    containers default to 64 MiB and NCCL fails with "Error while creating shared memory
    segment" / "failed to extend /dev/shm", or crashes the rank with SIGBUS.

    Give the container more shared memory (docker --shm-size=16g; Kubernetes: an emptyDir with
    medium: Memory mounted at /dev/shm).
    """
    pinned = job.profile.min_shm_mib if job.profile else None
    if not job.uses_gpus and not (job.context == "node" and pinned is not None):
        return
    minimum = MIN_SHM if pinned is None else pinned << 20
    groups: dict[int, list[int]] = {}
    system = job.node_section("system")
    sizes: list[Any] = [s["shm_bytes"] for s in job.node_column("system")]
    if set(map(type, sizes)) == {int} and min(sizes) >= minimum:
        return  # every node has enough
    for i in job.node_reps:
        size = system[i]["shm_bytes"]
        ranks_here = max(len(job.node_of(i)), job.launch(i)["local_world_size"] or 0)
        if isinstance(size, int) and size < minimum and (ranks_here > 1 or job.context == "node"):
            groups.setdefault(size, []).extend(job.node_of(i))
    for size, members in groups.items():
        yield Hit(
            f"/dev/shm is {size >> 20} MiB",
            members,
            expected=f">= {minimum >> 20} MiB",
            actual=f"{size >> 20} MiB",
            fix="mount a larger /dev/shm (--shm-size, or an emptyDir with medium: Memory)",
            verify="df -h /dev/shm   # on each named host",
        )


@check("SYS002", Severity.WARNING, "memlock limit too low for InfiniBand")
def memlock(job: Job) -> Iterator[Hit]:
    """Nodes with InfiniBand/RoCE devices run the job with an unlimited locked-memory limit.

    RDMA registers (pins) communication buffers; a low RLIMIT_MEMLOCK makes NCCL's IB transport
    fail to register memory ("ibv_reg_mr failed") or fall back to sockets silently.

    Set `ulimit -l unlimited` for the job (Slurm: PropagateResourceLimits, /etc/security/
    limits.conf; containers: --ulimit memlock=-1).
    """
    groups: dict[int, list[int]] = {}
    for i, sysf in zip(job.node_reps, job.node_column("system"), strict=True):
        soft = sysf["memlock_soft"]
        if sysf["ib_devices"] and isinstance(soft, int) and soft != -1:
            groups.setdefault(soft, []).extend(job.node_of(i))
    for soft, members in groups.items():
        yield Hit(
            f"memlock is {soft >> 10} KiB with InfiniBand devices present",
            members,
            expected="unlimited",
            actual=f"{soft >> 10} KiB",
            fix="raise the memlock limit to unlimited for the job",
            verify="ulimit -l   # in the job's environment on each named host",
        )


def _master_reps(job: Job) -> list[int]:
    """One participant of each node that can host the store: the node of rank 0 / node rank 0,
    whichever of its participants came first in the input."""

    def compute() -> list[int]:
        nodes = job.node_lists
        return sorted({nodes[i][0] for i in indices(job.column("node_rank"), 0) + indices(job.ranks, 0)})

    return job.memo("system.master_reps", compute)


@check("SYS003", Severity.WARNING, "somaxconn below the number of store clients")
def somaxconn(job: Job) -> Iterator[Hit]:
    """On the master, net.core.somaxconn is at least the number of ranks that connect to the
    rendezvous store at once (WORLD_SIZE).

    TCPStore's listen backlog is capped by somaxconn; at job start every rank connects within a
    second and the excess connections are dropped and retried (torch warns "Starting store with
    N workers but somaxconn is M"), slowing or failing the rendezvous of large jobs.

    sysctl -w net.core.somaxconn=65535 on the nodes that can host rank 0.
    """
    ws = job.world_size
    for i in _master_reps(job):
        value = job.node_section("system")[i]["somaxconn"]
        if isinstance(ws, int) and isinstance(value, int) and value < ws:
            yield Hit(
                f"somaxconn {value} on the master for {ws} ranks",
                job.node_of(i),
                expected=f">= {ws}",
                actual=str(value),
                fix="sysctl -w net.core.somaxconn=65535",
                verify="sysctl net.core.somaxconn   # on the master",
            )


@check("SYS004", Severity.ERROR, "Open-file limit too low")
def nofile(job: Job) -> Iterator[Hit]:
    """On the master, the open-file limit (RLIMIT_NOFILE, soft) exceeds WORLD_SIZE plus
    headroom: the rendezvous store keeps one socket per rank. On every node, it is at least the
    profile's `min_nofile` when one is pinned (`validator node-check` checks a node alone by it).

    When the store runs out of descriptors, accept() fails (EMFILE) and the ranks beyond the limit
    never join: the job hangs in init_process_group at scale only. Data loaders and NCCL's proxy
    threads open many files per rank too.

    Raise the soft limit for the job (`ulimit -n 1048576`, Slurm PropagateResourceLimits,
    LimitNOFILE= in systemd units, --ulimit nofile= in containers).
    """
    ws = job.world_size
    for i in _master_reps(job):
        soft = job.node_section("system")[i]["nofile_soft"]
        if isinstance(ws, int) and isinstance(soft, int) and soft != -1 and soft < ws + 64:
            yield Hit(
                f"open-file limit {soft} on the master for {ws} ranks",
                job.node_of(i),
                expected=f">= {ws + 64}",
                actual=str(soft),
                fix="raise the open-file limit (ulimit -n) for the job",
                verify="ulimit -n   # in the job's environment on the master",
            )
    pinned = job.profile.min_nofile if job.profile else None
    if pinned is None:
        return
    groups: dict[int, list[int]] = {}
    for i, sysf in zip(job.node_reps, job.node_column("system"), strict=True):
        soft = sysf["nofile_soft"]
        if isinstance(soft, int) and soft != -1 and soft < pinned:
            groups.setdefault(soft, []).extend(job.node_of(i))
    for soft, members in groups.items():
        yield Hit(
            f"open-file limit {soft}; profile {job.profile.name if job.profile else ''} pins at least {pinned}",
            members,
            expected=f">= {pinned}",
            actual=str(soft),
            fix="raise the open-file limit (ulimit -n) for the job",
            verify="ulimit -n   # in the job's environment on each named host",
        )


CODES: dict[str, Check] = table(shm, memlock, somaxconn, nofile)
