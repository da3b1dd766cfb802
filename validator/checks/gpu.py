"""GPU: enough GPUs for the local ranks, one GPU per rank, the same GPUs and driver everywhere.
Silent for CPU (gloo) jobs: see ``Job.gpu_evidence`` (never environment variables alone)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from validator.checks.base import Check, Hit, Job, check, describe, majority_of, outliers
from validator.codes import table
from validator.facts.gpu import visible_count
from validator.model import Facts, Severity
from validator.targets import fold_ranks

NAME = itemgetter("name")
SMI = "nvidia-smi --query-gpu=index,uuid,name,driver_version --format=csv   # on each named host"


def node_gpu_count(job: Job, members: list[int]) -> int:
    """Usable GPUs of a node: every GPU some participant there may use. Ranks narrowed to one GPU
    each (srun --gpus-per-task, torchrun --virtual-local-rank) together use the node's GPUs."""
    first = visible_count(job.section("gpus")[members[0]])
    if len(members) == 1 or first >= len(members):
        return first  # the usual case: each rank sees the node's GPUs, enough for all of them
    seen: set[str] = set()
    most = 0
    for i in members:
        g = job.facts[i]["gpus"]
        uuids = g["visible"] if g["visible"] is not None else [d["uuid"] for d in g["devices"]]
        seen.update(uuids)
        most = max(most, len(uuids))
    return max(len(seen), most)  # max: devices without a UUID (old nvidia-smi) still count


def _ranks_on_node(job: Job, members: list[int]) -> int | None:
    column = job.column("local_world_size")
    lws, _ = majority_of(members, job.pick(column, members), job.is_reference)
    if isinstance(lws, int):
        return lws
    ranked = [i for i in members if job.ranks[i] is not None]
    return len(ranked) or None


@check("GPU001", Severity.ERROR, "Fewer GPUs than local ranks")
def too_few_gpus(job: Job) -> Iterator[Hit]:
    """Each node of a GPU job has at least as many usable GPUs (after CUDA_VISIBLE_DEVICES) as
    ranks it runs.

    A rank without a GPU of its own fails at `torch.cuda.set_device` (invalid device ordinal) or
    shares a GPU with another rank, which NCCL refuses ("Duplicate GPU detected").

    Lower --nproc-per-node / --ntasks-per-node to the GPU count, fix CUDA_VISIBLE_DEVICES, or
    drain the node if GPUs fell off the bus (nvidia-smi shows fewer than installed). A job that
    asks for GPUs only by its configuration (a profile's gpus_per_node, `--backend nccl`), on nodes
    where no GPU and no GPU driver answers, belongs on GPU nodes, or is a CPU job (gloo) that
    should not ask. NCCL_* or CUDA_VISIBLE_DEVICES alone never make a job a GPU job.
    """
    evidence = job.gpu_evidence
    if evidence is None:
        return
    groups: dict[tuple[int, int], list[int]] = {}
    lws = job.column("local_world_size")
    same = lws[0] if lws and isinstance(lws[0], int) and lws.count(lws[0]) == len(lws) else None  # every node's
    for members in job.nodes.values():
        need = same if same is not None else _ranks_on_node(job, members)
        have = node_gpu_count(job, members)
        if need is not None and have < need:
            groups.setdefault((have, need), []).extend(members)
    why, fix = "", "match --nproc-per-node to the GPUs, or drain the node"
    if not evidence.node:  # only the job's configuration asks for GPUs, on nodes without any: no node to drain
        why = f"; only {evidence.what} ({evidence.where}) asks for GPUs, and no node has a GPU or a GPU driver"
        fix = f"run the job on GPU nodes, or make it a CPU job (gloo) without {evidence.what}"
    for (have, need), members in groups.items():
        yield Hit(f"{have} usable GPU(s) for {need} local ranks{why}", members, expected=f">= {need}",
                  actual=str(have), fix=fix, verify=SMI)  # fmt: skip


def device_of(f: Facts) -> str | None:
    """The GPU a rank will use: its only visible GPU, or visible[LOCAL_RANK] (DDP convention)."""
    g = f["gpus"]
    visible = g["visible"] if g["visible"] is not None else [d["uuid"] for d in g["devices"]]
    lr = f["launch"]["local_rank"]
    if len(visible) == 1:
        return visible[0]
    if isinstance(lr, int) and 0 <= lr < len(visible):
        return visible[lr]
    return None


def usual_layout(job: Job) -> bool:
    """Each node's participants consecutive in the input, with LOCAL_RANK 0..n-1 in that order
    and LOCAL_WORLD_SIZE n (n: its participants): settled for every node at once, at C speed."""

    def compute() -> bool:
        nodes = job.nodes.values()
        if tuple(chain.from_iterable(nodes)) != tuple(range(len(job))):
            return False
        sizes = list(map(len, nodes))
        lrs, lws = tuple(chain.from_iterable(map(range, sizes))), tuple(chain.from_iterable(map(repeat, sizes, sizes)))
        return tuple(job.column("local_rank")) == lrs and tuple(job.column("local_world_size")) == lws

    return job.memo("gpu.usual_layout", compute)


def _distinct_by_local_rank(job: Job, column: Sequence[Any], local_ranks: Sequence[Any], members: list[int]) -> bool:
    """The common case, settled without resolving each rank's device: every rank of the node sees
    the same list of several GPUs (``column``: each rank's visible list) and picks
    visible[LOCAL_RANK] with a distinct LOCAL_RANK."""
    visible = job.pick(column, members)
    if len(members) < 2 or visible[0] is None or len(visible[0]) < 2 or visible.count(visible[0]) != len(visible):
        return False
    return len(set(job.pick(local_ranks, members))) == len(members)


@check("GPU002", Severity.ERROR, "Two local ranks on one GPU")
def shared_gpu(job: Job) -> Iterator[Hit]:
    """No two ranks on a node resolve to the same physical GPU (by UUID, through
    CUDA_VISIBLE_DEVICES and LOCAL_RANK).

    NCCL refuses it at communicator init: "Duplicate GPU detected : rank X and rank Y both on
    CUDA device ..." (NCCL >= 2.28: "Multiple Ranks are using the same GPU/Partition").

    Give each rank its own GPU: one CUDA_VISIBLE_DEVICES entry per rank, or the same list on all
    ranks and torch.cuda.set_device(LOCAL_RANK).
    """
    if not job.uses_gpus:
        return
    column = job.memo("gpu.visible", lambda: [g["visible"] for g in job.section("gpus")])
    if usual_layout(job):  # distinct local ranks on every node: settled at once when each node's
        # ranks all see the same list of several GPUs
        firsts = [column[members[0]] for members in job.nodes.values()]
        same = chain.from_iterable(map(repeat, firsts, map(len, job.nodes.values())))
        if all(v is not None and len(v) > 1 for v in firsts) and tuple(column) == tuple(same):
            return
    local_ranks = job.column("local_rank")
    for members in job.nodes.values():
        if _distinct_by_local_rank(job, column, local_ranks, members):
            continue
        by_gpu: dict[str, list[int]] = {}
        for i in members:
            if job.ranks[i] is not None and (uuid := device_of(job.facts[i])):
                by_gpu.setdefault(uuid, []).append(i)
        for uuid, who in by_gpu.items():
            if len(who) > 1:
                ranks = fold_ranks(r for i in who if (r := job.rank(i)) is not None)
                yield Hit(
                    f"ranks {ranks} on {job.host(who[0])} all use GPU {uuid}",
                    who,
                    expected="one rank per GPU",
                    actual=f"{len(who)} ranks",
                    fix="give each rank its own GPU (CUDA_VISIBLE_DEVICES / LOCAL_RANK)",
                    verify=SMI,
                )


def _per_node(job: Job, what: str, key: Callable[[int], str | int | None]) -> Iterator[Hit]:
    expected, groups = job.node_majority(key)
    for value, members in outliers(groups, expected):
        yield Hit(
            f"{what} {value} where the other nodes have {expected} ({describe(job, groups, by_host=True)})",
            members,
            expected=str(expected),
            actual=str(value),
            fix=f"drain the named nodes or bring their {what} in line",
            verify=SMI,
        )


@check("GPU003", Severity.WARNING, "GPU count differs from the other nodes")
def gpu_count(job: Job) -> Iterator[Hit]:
    """Every node of a GPU job has the same number of GPUs (peer majority).

    A node with fewer GPUs usually lost one (Xid error, fallen off the bus) and will be slow or
    fail once the job needs all of them.

    Drain the node and check `nvidia-smi` and the kernel log (`dmesg | grep -i xid`).
    """
    if job.uses_gpus:
        gpus = job.section("gpus")
        yield from _per_node(job, "GPU count", lambda i: len(gpus[i]["devices"]))


@check("GPU004", Severity.WARNING, "GPU model differs from the other nodes")
def gpu_model(job: Job) -> Iterator[Hit]:
    """Every node of a GPU job has the same GPU model (peer majority).

    Mixed models make every collective run at the pace of the slowest GPU and can change
    numerics (bf16/fp8 support, memory size per rank).

    Restrict the job to one node type (a Slurm constraint or a Kubernetes node selector).
    """
    if job.uses_gpus:
        models: dict[tuple[str, ...], str | None] = {}  # a node's GPU names -> its model: joined once per distinct list
        gpus = job.section("gpus")

        def model(i: int) -> str | None:
            names = tuple(map(NAME, gpus[i]["devices"]))
            found = models.get(names, "")
            if found == "":
                found = models[names] = ", ".join(sorted(set(names))) or None
            return found

        yield from _per_node(job, "GPU model", model)


@check("GPU005", Severity.WARNING, "GPU driver differs from the other nodes")
def gpu_driver(job: Job) -> Iterator[Hit]:
    """Every node of a GPU job runs the same NVIDIA driver version (peer majority).

    A node with another driver may lack the CUDA version the job's torch needs, or behave
    differently under NCCL (a common cause of hangs after partial upgrades).

    Drain the node and upgrade or roll back its driver to the fleet's version.
    """
    if job.uses_gpus:
        gpus = job.section("gpus")
        yield from _per_node(job, "driver", lambda i: gpus[i]["driver"])


@check("GPU006", Severity.ERROR, "CUDA_VISIBLE_DEVICES names a GPU that is not there")
def bad_visible_devices(job: Job) -> Iterator[Hit]:
    """Every entry of CUDA_VISIBLE_DEVICES names a GPU of this node (index, UUID or UUID
    prefix, MIG UUID), without repeats.

    CUDA silently ignores an invalid entry and everything after it, so the rank sees fewer GPUs
    than intended (or none), and LOCAL_RANK then indexes the wrong device or fails.

    Fix the list the scheduler or launch script sets (under Slurm with ConstrainDevices, indices
    are relative to the job's GPUs: compare counts, not values).
    """
    groups: dict[str, list[int]] = {}
    gpus = job.section("gpus")
    if not any(g["visible_error"] for g in dict(zip(map(id, gpus), gpus, strict=True)).values()):  # one a node
        return
    for i in [i for i, g in enumerate(gpus) if g["visible_error"] and g["source"] != "none"]:
        groups.setdefault(str(gpus[i]["visible_error"]), []).append(i)
    for err, members in groups.items():
        yield Hit(
            err,
            members,
            expected="GPUs of this node",
            actual=err.split(":", 1)[0],
            fix="set CUDA_VISIBLE_DEVICES to GPUs that exist on the node",
            verify=SMI,
        )


CODES: dict[str, Check] = table(too_few_gpus, shared_gpu, gpu_count, gpu_model, gpu_driver, bad_visible_devices)
