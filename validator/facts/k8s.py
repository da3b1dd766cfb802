"""Kubernetes pods: what a pod can know about its place in a training job.

Pure: env in, contract fields out. Which variables exist in an init container, and why, is in
``docs/kubernetes.md`` (sources: ``../shared/reference/launch-env.md`` §1.3-1.4 and the
controllers' code). In short: the Job controller injects ``JOB_COMPLETION_INDEX`` into init
containers too; LeaderWorkerSet injects ``LWS_*`` into them; JobSet injects nothing; the Kubeflow
training-operator (v1) and Trainer (v2) inject their variables only into the training
container, so the example manifests set the same facts on the init container through the
downward API. The names read here are exactly the ones those manifests set.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from validator.model import Launcher

# PyTorchJob v1 pod labels (training-operator), exposed by the manifests as env
KUBEFLOW_TYPE = "KUBEFLOW_REPLICA_TYPE"  # metadata.labels['training.kubeflow.org/replica-type']
KUBEFLOW_INDEX = "KUBEFLOW_REPLICA_INDEX"  # metadata.labels['training.kubeflow.org/replica-index']
# JobSet pod labels, exposed by the manifests as env (JobSet injects no variables itself)
JOBSET_JOB_INDEX = "JOBSET_JOB_INDEX"  # metadata.labels['jobset.sigs.k8s.io/job-index']
JOBSET_REPLICAS = "JOBSET_REPLICAS"  # metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']
POD_LAUNCHERS: tuple[Launcher, ...] = ("kubeflow", "trainer", "jobset", "indexed-job", "lws")


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def pod_contract(launcher: Launcher, env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(field, raw value, source) for what a pod's labels say about its node rank, where the
    controller does not hand it over as one variable. Applied before the generic variables,
    which still win (an explicit PET_NODE_RANK or NODE_RANK)."""
    out: list[tuple[str, str, str]] = []
    if launcher == "kubeflow" and KUBEFLOW_TYPE in env and KUBEFLOW_INDEX in env:
        # envvar.go: RANK is the pod's index, Master 0, Worker i -> i + 1 (one Master replica)
        kind, index = env[KUBEFLOW_TYPE].strip().lower(), _int(env[KUBEFLOW_INDEX])
        src = f"env:{KUBEFLOW_TYPE}+{KUBEFLOW_INDEX}"
        if index is None or kind not in ("master", "worker"):
            out.append(("node_rank", f"{kind}-{env[KUBEFLOW_INDEX]}", src))  # recorded as invalid
        else:
            out.append(("node_rank", str(index + (kind == "worker")), src))
    if launcher == "jobset" and JOBSET_JOB_INDEX in env and JOBSET_REPLICAS in env:
        # node rank = job index x pods per child job + completion index; NNODES counts all pods
        job, replicas = _int(env[JOBSET_JOB_INDEX]), _int(env[JOBSET_REPLICAS])
        pod, nnodes = _int(env.get("JOB_COMPLETION_INDEX")), _int(env.get("NNODES"))
        if job is not None and pod is not None and replicas and nnodes and nnodes % replicas == 0:
            rank = job * (nnodes // replicas) + pod
            out.append(("node_rank", str(rank), f"env:{JOBSET_JOB_INDEX}+JOB_COMPLETION_INDEX"))
    return out


def _indices(n: int, start: int = 0) -> str:
    return str(start) if n - start == 1 else f"[{start}-{n - 1}]"


def pod_hosts(env: dict[str, str], master: str | None, nnodes: int | None) -> str | None:
    """The hostnames of the job's pods in node-rank order, as a hostlist (``train-[0-3]``), from
    the naming each controller uses, anchored on the master's name (its first DNS label):

    - Indexed Job ``<job>-0``: ``<job>-<index>``
    - JobSet / Trainer v2 ``<jobset>-<rjob>-0-0``: ``<jobset>-<rjob>-<job index>-<pod index>``
    - LeaderWorkerSet leader ``<lws>-<group>``: workers ``<lws>-<group>-<worker index>``
    - PyTorchJob v1 (KUBEFLOW_JOB_NAME): ``<job>-master-0``, then ``<job>-worker-<index>``

    None when the names do not follow the pattern (then missing pods are named by rank only;
    ``--hosts`` gives the names explicitly)."""
    if not master or not isinstance(nnodes, int) or nnodes < 1:
        return None
    first = master.split(".", 1)[0]
    if "LWS_WORKER_INDEX" in env or "LWS_LEADER_ADDRESS" in env:
        leader = env.get("LWS_LEADER_ADDRESS", master).split(".", 1)[0]
        return leader if nnodes == 1 else f"{leader},{leader}-{_indices(nnodes, 1)}"
    if KUBEFLOW_TYPE in env:  # pod names from the job name label (the master's address is a Service)
        job = env.get("KUBEFLOW_JOB_NAME") or (first.removesuffix("-master-0") if first.endswith("-master-0") else "")
        if not job:
            return None
        return f"{job}-master-0" + (f",{job}-worker-{_indices(nnodes - 1)}" if nnodes > 1 else "")
    if "JOB_COMPLETION_INDEX" not in env:  # Indexed Job pods (JobSet, Trainer v2 included) have it
        return None
    replicas = _int(env.get(JOBSET_REPLICAS)) or 1
    if first.endswith("-0-0"):  # JobSet and Trainer v2 pods
        ok = nnodes % replicas == 0
        return f"{first[:-4]}-{_indices(replicas)}-{_indices(nnodes // replicas)}" if ok else None
    if first.endswith("-0"):  # a plain Indexed Job
        return f"{first[:-2]}-{_indices(nnodes)}"
    return None
