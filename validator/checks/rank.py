"""RNK: the rank layout. Every rank exactly once, agreeing on the world, node by node."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from validator.checks.base import FEW, Check, Hit, Job, all_in_range, check, describe, indices, majority_of, outliers
from validator.checks.gpu import usual_layout
from validator.codes import table
from validator.errors import UserError
from validator.facts import launchopts
from validator.model import Severity
from validator.targets import expand, fold_ranks

RERUN = "validator check FACTS... --select RNK (or rerun the preflight) must report no RNK finding"


def _nodelist(job: Job) -> list[str] | None:
    """The job's nodes, when every participant names the same nodelist and it expands (a bad or
    oversized one names nobody: the hostlist came from the input)."""
    nodelists = set(job.column("nodelist")) - {None, ""}
    if len(nodelists) != 1:
        return None
    try:
        return expand(str(next(iter(nodelists))))
    except UserError:
        return None


def _expected_hosts(job: Job) -> tuple[list[str], int] | None:
    """The job's nodelist and its ranks per node, when every participant agrees on both: rank r
    should run on nodelist[r // ranks-per-node]. Computed once, whatever the number of ranks."""
    lws = set(job.column("local_world_size"))
    n = next(iter(lws)) if len(lws) == 1 else None
    names = _nodelist(job) if isinstance(n, int) and n > 0 else None
    return (names, n) if names is not None and isinstance(n, int) else None


@check("RNK001", Severity.ERROR, "Duplicate rank")
def duplicate_rank(job: Job) -> Iterator[Hit]:
    """Every RANK is claimed by exactly one process.

    Two processes with the same RANK never form a process group: with RANK=0 twice, one fails
    with EADDRINUSE on MASTER_PORT and the other waits for clients until the timeout; with a
    non-zero duplicate, every rank waits for the missing one (`wait timeout ... keys:
    /default_pg/0//cpu//0/N`).

    Derive RANK from the launcher instead of setting it by hand: torchrun assigns it, under srun
    use RANK=$SLURM_PROCID, under MPI use OMPI_COMM_WORLD_RANK. Check that two launches of the
    same job did not land on the same nodes.
    """
    by_rank: dict[int, list[int]] = {}
    dups = [r for r, n in Counter(job.ranks).items() if n > 1 and r is not None]  # counted at C speed
    if len(dups) <= FEW:  # the usual few: find each one's processes at C speed
        by_rank = {r: indices(job.ranks, r) for r in dups}
    else:
        seen: dict[int, int] = {}
        for i, rank in enumerate(job.ranks):
            if rank is None:
                continue
            first = seen.setdefault(rank, i)
            if first != i:
                by_rank.setdefault(rank, [first]).append(i)
    for rank, members in sorted(by_rank.items()):
        if len(members) > 1:
            who = ", ".join(f"{job.host(i)} pid {job.facts[i]['pid']}" for i in members[:4])
            yield Hit(
                f"rank {rank} is claimed by {len(members)} processes ({who})",
                members,
                expected="1 process",
                actual=f"{len(members)} processes",
                fix="give every process its own RANK (torchrun assigns it; under srun use RANK=$SLURM_PROCID)",
                verify=RERUN,
            )


@check("RNK002", Severity.ERROR, "Missing ranks")
def missing_ranks(job: Job) -> Iterator[Hit]:
    """Every rank from 0 to WORLD_SIZE-1 is present.

    init_process_group waits for all WORLD_SIZE ranks; a rank that never starts leaves the others
    blocked until the store timeout (torchrun: 900 s by default, then only "N-1/N clients
    joined", which does not say which rank).

    Start the missing ranks (the named hosts are where they should have run), or lower
    WORLD_SIZE / --nnodes to the ranks you really have.
    """
    ws = job.world_size
    if not job.ranked or not isinstance(ws, int) or ws <= 0:
        return
    if ws <= 2 * len(job.ranks):  # at C speed, in memory the size of the input
        missing = sorted(set(range(ws)).difference(job.ranks))
    else:
        present = set(job.ranks)
        missing = [r for r in range(ws) if r not in present]
    if not missing:
        return
    layout = _expected_hosts(job)
    hosts = sorted({layout[0][r // layout[1]] for r in missing if r // layout[1] < len(layout[0])}) if layout else []
    where = f" (expected on {', '.join(hosts[:5])}{'...' if len(hosts) > 5 else ''})" if hosts else ""
    yield Hit(
        f"{len(missing)} of {ws} ranks are missing: {fold_ranks(missing)}{where}",
        [],
        ranks=missing,
        hosts=hosts,
        expected=f"ranks 0-{ws - 1}",
        actual=f"{ws - len(missing)} ranks present",
        fix="start the missing ranks, or make WORLD_SIZE match the ranks you launch",
        verify=RERUN,
    )


@check("RNK003", Severity.ERROR, "Rank outside the world")
def rank_out_of_range(job: Job) -> Iterator[Hit]:
    """0 <= RANK < WORLD_SIZE for every process (by its own WORLD_SIZE).

    Nothing in PyTorch checks this: a process with RANK=2 and WORLD_SIZE=2 just becomes a store
    client that times out connecting, and the real ranks wait for a rank that can never join.

    Fix the RANK/WORLD_SIZE the launcher passes to this process (usually an off-by-one in a
    hand-written launch script, or WORLD_SIZE not updated after removing nodes).
    """
    if all_in_range(job.ranks, job.column("world_size")):
        return
    bad: dict[tuple[int, int], list[int]] = {}
    for i, (rank, launch) in enumerate(zip(job.ranks, job.launches, strict=True)):
        ws = launch["world_size"]
        if isinstance(ws, int) and rank is not None and not 0 <= rank < ws:
            bad.setdefault((rank, ws), []).append(i)
    for (rank, ws), members in sorted(bad.items()):
        yield Hit(
            f"RANK={rank} is outside WORLD_SIZE={ws}",
            members,
            expected=f"0 <= RANK < {ws}",
            actual=str(rank),
            fix="pass each process a RANK below WORLD_SIZE",
            verify=RERUN,
        )


@check("RNK004", Severity.ERROR, "WORLD_SIZE disagrees")
def world_size_mismatch(job: Job) -> Iterator[Hit]:
    """Every process has the same WORLD_SIZE (compared with the peer majority).

    A rank with a different WORLD_SIZE waits for ranks that will never come, or leaves the others
    waiting for it: the job hangs in init_process_group until the timeout (observed:
    `wait timeout after 8000ms, keys: /default_pg/0//cpu//0/2` on one side and `Gloo
    connectFullMesh failed ... Connect timeout` on the other).

    Set WORLD_SIZE from one place for the whole job (torchrun computes it from --nnodes and
    --nproc-per-node; under srun use $SLURM_NTASKS).
    """
    launches, sizes = job.launches, job.column("world_size")
    if job.column("command").count(None) == len(job):  # no wrapper: nothing is derived
        expected, groups = job.world_sizes
    else:
        members = [i for i, lf in enumerate(launches) if not lf["sources"].get("world_size", "").startswith("derived")]
        expected, groups = job.majority(members, sizes.__getitem__)
    for value, who in outliers(groups, expected):
        yield Hit(
            f"WORLD_SIZE={value} where the rest of the job has {expected} ({describe(job, groups)})",
            who,
            expected=str(expected),
            actual=str(value),
            fix="launch every rank with the same WORLD_SIZE",
            verify=RERUN,
        )


@check("RNK005", Severity.ERROR, "Local ranks are not 0..L-1 on a node")
def local_ranks(job: Job) -> Iterator[Hit]:
    """On each node the LOCAL_RANKs are distinct and below LOCAL_WORLD_SIZE, and the node runs
    exactly LOCAL_WORLD_SIZE ranks.

    LOCAL_RANK picks the GPU (`torch.cuda.set_device(LOCAL_RANK)`); a duplicate puts two ranks
    on one GPU (NCCL: "Duplicate GPU detected"), a gap leaves a GPU idle and a rank missing.

    Let the launcher set LOCAL_RANK (torchrun, or $SLURM_LOCALID under srun) and make
    --nproc-per-node / --ntasks-per-node match on every node.
    """
    complete = job.world_size is not None and len(job.ranked) == job.world_size
    ranks, launches = job.ranks, job.launches
    lr_column, lws_column = job.column("local_rank"), job.column("local_world_size")
    for (host, node_rank), members in [] if usual_layout(job) else job.nodes.items():
        n, lrs = len(members), job.pick(lr_column, members)
        if None not in lrs and sorted(lrs) == list(range(n)) and job.pick(lws_column, members).count(n) == n:
            continue  # the usual node: local ranks 0..n-1 and LOCAL_WORLD_SIZE=n everywhere
        ranked = [i for i in members if ranks[i] is not None]
        if not ranked:
            continue
        lws, _ = job.majority(ranked, lambda i: launches[i]["local_world_size"])
        by_local: dict[int, list[int]] = {}
        for i in ranked:
            lr = launches[i]["local_rank"]
            if isinstance(lr, int):
                by_local.setdefault(lr, []).append(i)
        virtual = set(by_local) == {0} and all(
            len(job.facts[i]["gpus"]["visible"] or []) == 1 for i in ranked
        )  # torchrun --virtual-local-rank: LOCAL_RANK 0 everywhere, one GPU each
        where = f"{host}" + (f" (node rank {node_rank})" if node_rank is not None else "")
        dups = {lr: m for lr, m in by_local.items() if len(m) > 1}
        if dups and not virtual:
            lr, m = next(iter(sorted(dups.items())))
            yield Hit(
                f"LOCAL_RANK {lr} is used by ranks {fold_ranks(job.rank(i) or 0 for i in m)} on {where}",
                m,
                expected="distinct local ranks",
                actual=f"LOCAL_RANK {lr} x{len(m)}",
                fix="let the launcher assign LOCAL_RANK (torchrun, or $SLURM_LOCALID)",
                verify=RERUN,
            )
        if isinstance(lws, int):
            high = [i for lr, m in by_local.items() if lr >= lws for i in m]
            if high:
                yield Hit(
                    f"LOCAL_RANK >= LOCAL_WORLD_SIZE={lws} on {where}",
                    high,
                    expected=f"0-{lws - 1}",
                    actual=", ".join(str(job.launch(i)["local_rank"]) for i in high[:8]),
                    fix="make LOCAL_WORLD_SIZE the number of ranks started on each node",
                    verify=RERUN,
                )
            elif complete and len(ranked) != lws and not dups:
                yield Hit(
                    f"{where} runs {len(ranked)} ranks but LOCAL_WORLD_SIZE is {lws}",
                    ranked,
                    expected=str(lws),
                    actual=str(len(ranked)),
                    fix="start LOCAL_WORLD_SIZE ranks on every node",
                    verify=RERUN,
                )


def _node_ranks(job: Job) -> dict[int, list[int]]:
    """node rank -> participants; in rank mode one entry per host for each node rank."""

    def compute() -> dict[int, list[int]]:
        modes = job.column("mode")
        agents = "node" in modes
        out: dict[int, list[int]] = {}
        for (_, node_rank), members in job.nodes.items():
            if node_rank is None:
                continue
            node_mode = [i for i in members if modes[i] == "node"] if agents else []
            out.setdefault(node_rank, []).extend(node_mode or members[:1])
        return out

    return job.memo("rank.node_ranks", compute)


@check("RNK006", Severity.ERROR, "Duplicate node rank")
def duplicate_node_rank(job: Job) -> Iterator[Hit]:
    """Each node rank (torchrun --node-rank, GROUP_RANK, SLURM_NODEID, the pod index) belongs
    to exactly one node.

    Two agents with the same node rank both claim the same block of global ranks: with a static
    rendezvous the second one never gets its ranks and the job waits until the timeout. Common
    causes: `torchrun` without `--node-rank` on every node (the default is 0), and
    `srun torchrun --node-rank=$SLURM_NODEID` in an sbatch script, where the batch shell expands
    the variable once (0, or empty) before srun starts a task on each node.

    Pass --node-rank=$SLURM_NODEID expanded on each node, inside single quotes
    (`srun bash -c 'torchrun --node-rank=$SLURM_NODEID ...'`), or the pod's index; or use
    --rdzv-backend=c10d, which assigns node ranks itself.
    """
    for node_rank, members in sorted(_node_ranks(job).items()):
        if len(members) > 1:
            srcs = {job.launch(i)["sources"].get("node_rank", "") for i in members}
            hint = " (torchrun's default --node-rank is 0)" if any("default" in s for s in srcs) else ""
            yield Hit(
                f"node rank {node_rank} is claimed by {len(members)} nodes{hint}",
                members,
                expected="1 node",
                actual=f"{len(members)} nodes",
                fix="pass a distinct --node-rank on every node, expanded on the node: "
                "srun bash -c 'torchrun --node-rank=$SLURM_NODEID ...' (single quotes)",
                verify=RERUN,
            )


@check("RNK007", Severity.ERROR, "Missing node ranks")
def missing_node_ranks(job: Job) -> Iterator[Hit]:
    """Every node rank from 0 to nnodes-1 is present.

    With a static rendezvous the master waits for all --nnodes agents; a node that never started
    leaves torchrun silent for 900 s and then prints only "1/2 clients joined".

    Start the missing node (named when the nodelist is known), or lower --nnodes.
    """
    nnodes = job.nnodes
    ranks = _node_ranks(job)
    if not ranks or not isinstance(nnodes, int):
        return
    missing = [n for n in range(nnodes) if n not in ranks]
    if not missing:
        return
    names = _nodelist(job) or []
    hosts = [names[n] for n in missing if n < len(names)]
    yield Hit(
        f"{len(missing)} of {nnodes} nodes are missing: node rank {fold_ranks(missing)}"
        + (f" ({', '.join(hosts[:5])})" if hosts else ""),
        [],
        hosts=hosts,
        expected=f"node ranks 0-{nnodes - 1}",
        actual=f"{nnodes - len(missing)} nodes present",
        fix="start the missing nodes, or lower --nnodes",
        verify=RERUN,
    )


@check("RNK008", Severity.ERROR, "WORLD_SIZE is not nnodes x ranks per node")
def world_size_product(job: Job) -> Iterator[Hit]:
    """WORLD_SIZE equals the number of nodes times LOCAL_WORLD_SIZE (when every node runs the
    same number of ranks).

    torchrun supports only homogeneous nodes; a WORLD_SIZE that is not nnodes x nproc means some
    ranks are counted that will never start (the job hangs) or started ranks are not counted
    (they fail with a rank outside the world).

    Derive WORLD_SIZE from the node count and --nproc-per-node (torchrun does this itself);
    under Kubeflow check nprocPerNode against the replica count.
    """
    lws_col = job.column("local_world_size")
    if not lws_col or lws_col.count(lws_col[0]) != len(lws_col):
        return  # heterogeneous nodes: RNK005 compares each node with its own count
    triples: dict[tuple[int, int, int], list[int]] = {}
    lws = lws_col[0]
    if not isinstance(lws, int):
        return
    for i, (ws, n) in enumerate(zip(job.column("world_size"), job.column("nnodes"), strict=True)):
        if isinstance(ws, int) and isinstance(n, int) and ws != n * lws:
            triples.setdefault((ws, n, lws), []).append(i)
    for (ws, n, lws), members in triples.items():
        yield Hit(
            f"WORLD_SIZE={ws} but {n} nodes x {lws} ranks per node = {n * lws}",
            members,
            expected=str(n * lws),
            actual=str(ws),
            fix="make WORLD_SIZE = nnodes x nproc-per-node",
            verify=RERUN,
        )


# must agree, and compared elsewhere: RDZ001/RDZ002 compare the endpoint as resolved (node001 and
# 10.0.0.1 are one master; GPU-A01 and gpu-a01:29400 one c10d endpoint), and torchrun ignores
# --master-addr/--master-port under c10d
ENDPOINT_OPTIONS = ("master_addr", "master_port", "rdzv_endpoint", "main_process_ip", "main_process_port")


def _compared(tool: str, members: list[int], launches: Sequence[Any], envs: Sequence[Any]) -> list[str]:
    """The must-agree options of ``tool`` some node gives (or sets by PET_*): the others are the
    launcher's default on every node."""
    table = launchopts.OPTIONS[tool]
    given: set[str] = set()
    for i in members:
        given.update(launches[i]["command"]["options"])
        if tool == "torchrun":
            given.update(k[4:].lower() for k in envs[i] if k.startswith("PET_"))
    return [n for n in table if n in given and table[n][0] == launchopts.JOB and n not in ENDPOINT_OPTIONS]


@check("RNK009", Severity.ERROR, "Launch options differ across nodes")
def launch_options(job: Job) -> Iterator[Hit]:
    """Every launch option that must agree across nodes has the same value on every node:
    torchrun's --nnodes, --nproc-per-node, --rdzv-backend, --rdzv-id,
    --max-restarts and --standalone, deepspeed's and `accelerate launch`'s counterparts and
    accelerate's distribution settings (each option's class: validator/facts/launchopts.py). A node that
    omits an option has its launcher's default (torchrun: its PET_* variable first).

    Silent failures: with a static rendezvous, nodes launched with --nnodes=2 and --nnodes=3 run
    with the master's value and exit 0 (a job with the wrong size); the reverse hangs until the
    timeout. A different --rdzv-id or endpoint splits the nodes into two jobs that each wait; a
    different ZeRO stage or FSDP setting issues other collectives and hangs at the first step.

    Generate the launch command once and run it unchanged on every node (srun, a pod template,
    one launch script); take per-node values only from --node-rank (--machine_rank).
    """
    launches = job.launches
    if job.column("command").count(None) == len(job):
        return  # no command line known
    by_tool: dict[str, list[int]] = {}
    for i, lf in enumerate(launches):
        if lf["command"] and lf["mode"] == "node" and lf["command"]["tool"] in launchopts.OPTIONS:
            by_tool.setdefault(lf["command"]["tool"], []).append(i)
    envs = job.section("env")
    for tool, members in by_tool.items():
        for name in _compared(tool, members, launches, envs) if len(members) > 1 else ():
            seen = [launchopts.effective(tool, name, launches[i]["command"]["options"], envs[i]) for i in members]
            shown = {i: v for i, v in zip(members, seen, strict=True) if v is not None}  # None: known at start
            expected, groups = majority_of(list(shown), [v[0] for v in shown.values()], job.is_reference)
            spelling, takes = launchopts.spellings(tool, name)[0], launchopts.OPTIONS[tool][name][1]
            for _, who in outliers(groups, expected):
                want, got = shown[groups[expected][0]][1], shown[who[0]][1]
                where = job.who(who)
                yield Hit(
                    f"{spelling}={got} on {where}; the other nodes use {want}"
                    if takes
                    else f"{spelling} {got} on {where}; {want} on the other nodes",
                    who,
                    expected=want,
                    actual=got,
                    fix=f"launch every node with {spelling}={want.split(' (')[0]}"
                    if takes
                    else f"give {spelling} on every node or on none",
                    verify=RERUN,
                )


CODES: dict[str, Check] = table(
    duplicate_rank,
    missing_ranks,
    rank_out_of_range,
    world_size_mismatch,
    local_ranks,
    duplicate_node_rank,
    missing_node_ranks,
    world_size_product,
    launch_options,
)
