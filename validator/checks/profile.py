"""PRF: what a launch profile pins (``launch_profiles/*.yaml``). Silent without ``--profile``."""

from __future__ import annotations

from collections.abc import Iterator

from validator.checks.base import Check, Hit, Job, check
from validator.checks.gpu import node_gpu_count
from validator.codes import table
from validator.facts.launch import detect_launcher
from validator.model import Severity
from validator.targets import expand, fold_hosts

VERIFY = "validator check FACTS... --profile PROFILE --select PRF"


@check("PRF001", Severity.ERROR, "Node count differs from the profile")
def nodes(job: Job) -> Iterator[Hit]:
    """The job has the number of nodes the profile pins (`nodes:`), counting the launch contract
    (--nnodes, SLURM_NNODES) and, for a scan, the hosts probed.

    A job sized for another node count wastes the allocation or waits for nodes it will not get.

    Launch with the profile's node count, or update the profile.
    """
    p = job.profile
    if p and p.nodes is not None and job.nnodes is not None and job.nnodes != p.nodes:
        yield Hit(
            f"job has {job.nnodes} nodes; profile {p.name} expects {p.nodes}",
            list(range(len(job))),
            expected=str(p.nodes),
            actual=str(job.nnodes),
            fix=f"launch on {p.nodes} nodes",
            verify=VERIFY,
        )


@check("PRF002", Severity.ERROR, "Ranks per node differ from the profile")
def ranks_per_node(job: Job) -> Iterator[Hit]:
    """Every node runs the number of ranks the profile pins (`ranks_per_node:`,
    --nproc-per-node, LOCAL_WORLD_SIZE).

    One rank per GPU is the usual contract; another count idles GPUs or oversubscribes them.

    Launch with --nproc-per-node / --ntasks-per-node equal to the profile's value.
    """
    p = job.profile
    if p and p.ranks_per_node is not None:
        for value, members in job.by_node(lambda i: job.launch(i)["local_world_size"]).items():
            if value != p.ranks_per_node:
                yield Hit(
                    f"{value} ranks per node; profile {p.name} expects {p.ranks_per_node}",
                    members,
                    expected=str(p.ranks_per_node),
                    actual=str(value),
                    fix="launch the profile's ranks per node",
                    verify=VERIFY,
                )


@check("PRF003", Severity.ERROR, "GPU count differs from the profile")
def gpus_per_node(job: Job) -> Iterator[Hit]:
    """Every node has the usable GPUs the profile pins (`gpus_per_node:`).

    A node with fewer GPUs than planned fails or slows the job; more usually means the job was
    scheduled on the wrong partition.

    Drain nodes with missing GPUs; schedule on the partition the profile describes.
    """
    p = job.profile
    if p and p.gpus_per_node is not None:
        for value, members in job.by_node(lambda i: node_gpu_count(job, job.node_of(i))).items():
            if value != p.gpus_per_node:
                yield Hit(
                    f"{value} GPUs; profile {p.name} expects {p.gpus_per_node}",
                    members,
                    expected=str(p.gpus_per_node),
                    actual=str(value),
                    fix="drain the node or fix the partition",
                    verify="nvidia-smi -L   # on each named host",
                )


@check("PRF004", Severity.ERROR, "GPU model differs from the profile")
def gpu_model(job: Job) -> Iterator[Hit]:
    """Every GPU's name contains the profile's `gpu_model:` (e.g. "H100").

    The job's memory and precision assumptions hold only on that model.

    Schedule on the right partition or node type.
    """
    p = job.profile
    if p and p.gpu_model:
        want = p.gpu_model.lower()
        for value, members in job.by_node(
            lambda i: ", ".join(sorted({d["name"] for d in job.facts[i]["gpus"]["devices"]})) or "no GPU",
        ).items():
            if want not in str(value).lower():
                yield Hit(
                    f"GPU {value}; profile {p.name} expects {p.gpu_model}",
                    members,
                    expected=p.gpu_model,
                    actual=str(value),
                    fix="schedule on nodes with the profile's GPU model",
                    verify="nvidia-smi -L   # on each named host",
                )


@check("PRF005", Severity.ERROR, "NCCL interface differs from the profile")
def interface(job: Job) -> Iterator[Hit]:
    """The interface NCCL would use first starts with the profile's `interface:` on every node.

    The profile names the cluster network; anything else is the management network, a bridge
    or loopback.

    Set NCCL_SOCKET_IFNAME to the profile's interface.
    """
    p = job.profile
    if p and p.interface:
        want = p.interface.lstrip("=")
        for value, members in job.by_node(lambda i: (job.facts[i]["network"]["nccl"]["ifaces"] or ["none"])[0]).items():
            if not str(value).startswith(want):
                yield Hit(
                    f"NCCL would use {value}; profile {p.name} expects {p.interface}",
                    members,
                    expected=p.interface,
                    actual=str(value),
                    fix=f"export NCCL_SOCKET_IFNAME={p.interface}",
                    verify="ip -br addr show   # on each named host",
                )


def _version(job: Job, i: int, key: str) -> str | None:
    f = job.facts[i]
    if key == "driver":
        return f["gpus"]["driver"]
    if key == "cuda":
        return f["software"]["torch_cuda"]
    return f["software"][key]  # type: ignore[literal-required, no-any-return]


@check("PRF006", Severity.ERROR, "Version differs from the profile")
def versions(job: Job) -> Iterator[Hit]:
    """torch, NCCL, CUDA (torch's), the driver and Python match the profile's `versions:` globs
    (e.g. `torch: "2.13.*"`).

    The profile records the stack the job was validated with.

    Install the pinned versions (use the profile's container image).
    """
    p = job.profile
    if not p:
        return
    for key in p.versions:
        for value, members in job.by_node(lambda i, k=key: _version(job, i, k) or "not installed").items():  # type: ignore[misc]
            if not p.version_ok(key, None if value == "not installed" else str(value)):
                yield Hit(
                    f"{key} {value}; profile {p.name} pins {p.versions[key]}",
                    members,
                    expected=p.versions[key],
                    actual=str(value),
                    fix=f"install {key} {p.versions[key]}",
                    verify=VERIFY,
                )


@check("PRF007", Severity.ERROR, "Environment differs from the profile")
def env(job: Job) -> Iterator[Hit]:
    """Every rank has the variables the profile's `env:` lists, with exactly those values.

    These are settings the job was tuned or validated with (NCCL_IB_HCA, NCCL_SOCKET_IFNAME,
    TORCH_NCCL_ASYNC_ERROR_HANDLING, ...).

    Export them in the job script or image.
    """
    p = job.profile
    if not p:
        return
    for name, want in p.env.items():
        groups: dict[str | None, list[int]] = {}
        for i, f in enumerate(job.facts):
            have = f["env"].get(name)
            if have != want:
                groups.setdefault(have, []).append(i)
        for have, members in groups.items():
            yield Hit(
                f"{name}={'unset' if have is None else repr(have)}; profile {p.name} sets {want!r}",
                members,
                expected=want,
                actual="unset" if have is None else have,
                fix=f"export {name}={want}",
                verify=f"env | grep ^{name}=",
            )


@check("PRF008", Severity.ERROR, "Hosts differ from the profile")
def hosts(job: Job) -> Iterator[Hit]:
    """The job runs on the hosts the profile's `hosts:` hostlist names, and all of them report.

    A host outside the list is the wrong allocation; a listed host that never reported is down
    or unreachable.

    Launch on the profile's hosts, or update the profile's hostlist.
    """
    p = job.profile
    if not p or not p.hosts:
        return
    want = set(expand(p.hosts))
    seen = set(job.hosts)
    extra = [i for i in range(len(job)) if job.host(i) not in want]
    if extra:
        yield Hit(
            f"hosts outside profile {p.name}: {fold_hosts(job.host(i) for i in extra)}",
            extra,
            expected=p.hosts,
            actual=fold_hosts(job.host(i) for i in extra),
            fix="launch on the profile's hosts",
            verify=VERIFY,
        )
    missing = sorted(want - seen)
    if missing and job.context != "preflight":
        yield Hit(
            f"no facts from {fold_hosts(missing)} (listed in profile {p.name})",
            [],
            hosts=missing,
            expected=p.hosts,
            actual=f"{len(seen & want)} of {len(want)} hosts",
            fix="probe or start the missing hosts",
            verify=VERIFY,
        )


# Launchers nest (`srun torchrun`, torchrun inside a PyTorchJob pod): each leaves its variables.
LAUNCHER_VARS = {
    "torchrun": ("TORCHELASTIC_RUN_ID", "GROUP_RANK"),
    "slurm": ("SLURM_JOB_ID", "SLURM_PROCID"),
    "kubeflow": ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT"),
    "trainer": ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"),
    "indexed-job": ("JOB_COMPLETION_INDEX",),
    "jobset": ("JOBSET_NAME",),
    "lws": ("LWS_WORKER_INDEX",),
    "mpi": ("OMPI_COMM_WORLD_RANK",),
    "mpich": ("PMI_RANK", "PMI_ID", "MPI_LOCALRANKID"),
    "deepspeed": ("CROSS_RANK",),
}


def _launchers(job: Job, i: int) -> set[str]:
    env = job.facts[i]["env"]
    seen = {job.launch(i)["launcher"], detect_launcher(env)}
    return seen | {name for name, names in LAUNCHER_VARS.items() if any(n in env for n in names)}


@check("PRF009", Severity.ERROR, "Launcher differs from the profile")
def launcher(job: Job) -> Iterator[Hit]:
    """Every participant was started by the launcher the profile's `launcher:` names (torchrun,
    slurm, kubeflow, ...), as detected from its environment or its launch command (launchers
    nest: `srun torchrun` matches both slurm and torchrun).

    A profile describes how the job is meant to start; another launcher sets other variables
    (a plain `python` under srun gets no RANK), so the rest of the profile no longer applies.

    Start the job the way the profile describes, or update the profile.
    """
    p = job.profile
    if p and p.launcher:
        groups: dict[str, list[int]] = {}
        for i in range(len(job)):
            if p.launcher not in _launchers(job, i):
                groups.setdefault(job.launch(i)["launcher"], []).append(i)
        for value, members in groups.items():
            yield Hit(
                f"started by {value}; profile {p.name} expects {p.launcher}",
                members,
                expected=p.launcher,
                actual=value,
                fix=f"launch with {p.launcher}",
                verify=VERIFY,
            )


@check("PRF010", Severity.ERROR, "MASTER_PORT differs from the profile")
def master_port(job: Job) -> Iterator[Hit]:
    """Every participant uses the rendezvous port the profile's `master_port:` pins.

    The pinned port is the one the firewall and the cluster's port plan allow; another port may
    be blocked between nodes or collide with a service on the master.

    Pass the profile's port (MASTER_PORT, --master-port or the rendezvous endpoint).
    """
    p = job.profile
    if p and p.master_port is not None:
        groups: dict[int | None, list[int]] = {}
        for i, launch in enumerate(job.launches):
            port = launch["master_port"]
            if port != p.master_port:
                groups.setdefault(port, []).append(i)
        for value, members in groups.items():
            yield Hit(
                f"MASTER_PORT {'unset' if value is None else value}; profile {p.name} pins {p.master_port}",
                members,
                expected=str(p.master_port),
                actual="unset" if value is None else str(value),
                fix=f"export MASTER_PORT={p.master_port} (or --master-port={p.master_port})",
                verify=VERIFY,
            )


CODES: dict[str, Check] = table(
    nodes, ranks_per_node, gpus_per_node, gpu_model, interface, versions, env, hosts, launcher, master_port
)
