"""Checks for contracts that pods get from templates and controllers (docs/kubernetes.md): the
Kubeflow v1 node-rank trap, and node counts and indexes that come from several templates or
from a manifest that no longer matches its completions."""

from __future__ import annotations

from collections.abc import Iterator

from validator.checks.base import Check, Hit, Job, all_in_range, check, describe, outliers
from validator.codes import table
from validator.model import Severity

RERUN = "validator check FACTS... --select RNK (or rerun the preflight) must report no RNK finding"


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


@check("ENV006", Severity.ERROR, "Kubeflow nprocPerNode > 1 started without torchrun")
def kubeflow_plain_python(job: Job) -> Iterator[Hit]:
    """Under a Kubeflow PyTorchJob (training-operator v1) with nprocPerNode > 1
    (PET_NPROC_PER_NODE), the training command is torchrun, not plain python; checked where
    the command is known (`validator preflight -- COMMAND` or `validator probe -- COMMAND` in
    the training container).

    The operator sets RANK to the pod's node rank but WORLD_SIZE to replicas x nprocPerNode
    (a process count). torchrun re-derives every worker's RANK and WORLD_SIZE from the PET_*
    variables; plain `python train.py` takes the pair as its own: one process per pod with
    ranks 0..replicas-1 waits in init_process_group for WORLD_SIZE ranks that never start.

    Start the training container with torchrun (`torchrun train.py`: PET_NNODES,
    PET_NPROC_PER_NODE, PET_NODE_RANK and PET_MASTER_ADDR/PORT supply its options), or set
    nprocPerNode to 1 when each pod runs one process.
    """
    groups: dict[tuple[str, int, str, str], list[int]] = {}
    if job.column("command").count(None) == len(job):
        return  # no command line known
    for i, lf in enumerate(job.launches):
        cmd = lf["command"]
        if cmd is None or cmd["tool"] != "python":
            continue  # no command, or torchrun / python -m torch.distributed.run, which re-derive both
        env = job.facts[i]["env"]
        nproc = _int(env.get("PET_NPROC_PER_NODE"))
        if nproc is None or nproc <= 1:
            continue
        if "RANK" in env and "WORLD_SIZE" in env and "TORCHELASTIC_RUN_ID" not in env:  # v1's, not torchrun's
            key = (env["WORLD_SIZE"], nproc, " ".join(cmd["argv"][:3]), cmd["script"] or "train.py")
            groups.setdefault(key, []).append(i)
    for (world, nproc, argv, script), members in groups.items():
        ranks = sorted({job.facts[i]["env"]["RANK"] for i in members}, key=lambda r: (len(r), r))
        yield Hit(
            f"nprocPerNode={nproc} but `{argv}` is not torchrun: RANK={','.join(ranks[:4])} is the pod's node "
            f"rank and WORLD_SIZE={world} counts processes; this process would wait for {world} ranks",
            members,
            expected="torchrun (or nprocPerNode: 1)",
            actual=argv,
            fix=f"start the container with torchrun (it reads PET_*), e.g. `torchrun {script}`, or set nprocPerNode: 1",
            verify="validator probe --json -- <the container's command> > f.json && validator check f.json --select ENV006",
        )


def _env_counted(job: Job) -> list[int]:
    """Nodes (one participant each) whose node count comes from the environment (a wrapped
    torchrun's --nnodes is RNK009's business)."""
    launches = job.launches
    return [i for i in job.node_reps if launches[i]["sources"].get("nnodes", "").startswith("env:")]


@check("RNK010", Severity.ERROR, "Node count differs across nodes")
def node_count(job: Job) -> Iterator[Hit]:
    """Every node takes the same number of nodes from its environment (NNODES, PET_NNODES,
    LWS_GROUP_SIZE, GROUP_WORLD_SIZE, SLURM_NNODES), compared with the peer majority.

    The master waits for its own count and the others for theirs: a pod whose template says one
    node more waits for a node that never starts, one that says fewer leaves a node out of the
    rendezvous. Pods get these values from templates (a PyTorchJob's Master and Worker specs are
    separate) and from manifests edited while old pods still run.

    Set the node count once for all pods (one template, or the same value in every replica
    spec) and delete pods left from an earlier version of the job.
    """
    launches = job.launches
    expected, groups = job.majority(_env_counted(job), lambda i: launches[i]["nnodes"])
    for value, reps in outliers(groups, expected):
        src = launches[reps[0]]["sources"]["nnodes"].removeprefix("env:")
        who = [m for i in reps for m in job.node_of(i)]
        yield Hit(
            f"{src}={value} on {job.who(who)} where the rest of the job has {expected} ({describe(job, groups, by_host=True)})",
            who,
            expected=str(expected),
            actual=str(value),
            fix=f"set {src}={expected} for every pod (one template, or the same value in every replica spec)",
            verify=RERUN,
        )


@check("RNK011", Severity.ERROR, "Node rank outside the node count")
def node_rank_range(job: Job) -> Iterator[Hit]:
    """0 <= node rank < number of nodes on every node (the pod index, JOB_COMPLETION_INDEX,
    LWS_WORKER_INDEX, PET_NODE_RANK or --node-rank against NNODES, PET_NNODES or --nnodes).

    A node rank at or beyond the count joins a rendezvous that has no place for it: a static
    rendezvous waits until its timeout, and the nodes with valid ranks wait for the one that
    is numbered outside. With Indexed Jobs this is a `completions` raised without raising the
    node count the pods are told.

    Make the node count equal to the number of pods (for an Indexed Job or JobSet: NNODES =
    completions x replicas), or lower the completions.
    """
    if all_in_range(job.column("node_rank"), job.column("nnodes")):
        return
    bad: dict[tuple[int, int], list[int]] = {}
    for i, lf in enumerate(job.launches):
        nr, n = lf["node_rank"], lf["nnodes"]
        if isinstance(nr, int) and isinstance(n, int) and not 0 <= nr < n:
            bad.setdefault((nr, n), []).append(i)
    for (nr, n), members in sorted(bad.items()):
        src = job.launch(members[0])["sources"]
        yield Hit(
            f"node rank {nr} ({src.get('node_rank', '?')}) is outside {n} nodes ({src.get('nnodes', '?')})",
            members,
            expected=f"0 <= node rank < {n}",
            actual=str(nr),
            fix="make the node count match the number of pods (NNODES = completions), or lower the completions",
            verify=RERUN,
        )


CODES: dict[str, Check] = table(node_count, node_rank_range, kubeflow_plain_python)
