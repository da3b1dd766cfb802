"""The launch contract, normalised across launchers, each value with its source.

Pure: env (already filtered by the agent) and the parsed launch command in, ``LaunchFacts`` out.
Sources: ``../shared/reference/launch-env.md`` §1 (torchrun, Slurm, Kubernetes, Kubeflow, MPI,
DeepSpeed). Precedence follows what the training process will actually read: the variables
``init_process_group`` reads (RANK, WORLD_SIZE, MASTER_*) win over launcher-specific ones, and a
wrapped torchrun command wins over both for the node it launches.
"""

from __future__ import annotations

import re

from validator import MAX_RANKS
from validator.facts import launchopts
from validator.facts.k8s import KUBEFLOW_TYPE, pod_contract, pod_hosts

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import CommandFacts, Launcher, LaunchFacts

# what torchrun uses for an option a node omits (and no PET_* variable sets): its parser's defaults
TORCHRUN_DEFAULTS = {
    d: str(launchopts.default("torchrun", d))
    for d in ("nnodes", "nproc_per_node", "rdzv_backend", "rdzv_id", "node_rank", "master_addr", "master_port")
}
C10D_DEFAULT_PORT = 29400
NPROC_WORDS = launchopts.NPROC_WORDS  # --nproc-per-node values torchrun resolves at start
INT_FIELDS = ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "nnodes", "master_port")
SIZE_FIELDS = INT_FIELDS[:-1]  # ranks and sizes: beyond MAX_RANKS they are refused, never allocated for


class Contract:
    """Accumulates fields with their sources; later ``set`` calls override earlier ones."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.invalid: dict[str, str] = {}

    def set(self, field: str, raw: str | None, source: str) -> None:
        if raw is None or raw == "":
            return
        value: Any = raw.strip()
        if field == "nnodes":  # "N" or elastic "MIN:MAX": the static rendezvous waits for MAX
            value = value.rsplit(":", 1)[-1]
        if field == "local_world_size" and value in NPROC_WORDS:
            return  # valid, but the count is only known once torchrun starts
        if field in INT_FIELDS:
            try:
                value = int(value) if len(value) <= 20 else None
            except ValueError:
                value = None
            if value is None or (field in SIZE_FIELDS and abs(value) > MAX_RANKS):
                self.invalid[source] = raw[:200]  # not a number, or no job is this large
                return
        self.values[field] = value
        self.sources[field] = source

    def env(self, field: str, env: dict[str, str], *names: str) -> None:
        for name in names:
            if name in env:
                self.set(field, env[name], f"env:{name}")
                return


def tasks_on_node(text: str, node: int) -> int | None:
    """The count for node index ``node`` in Slurm's compressed counts (``2(x3),1``: 2, 2, 2, 1),
    None past the end; found without expanding the list (``1(x1000000000)`` is a short string)."""
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d{1,9})(?:\(x(\d{1,9})\))?\s*", part)
        if not m:
            raise ValueError(f"bad task count {part[:40]!r}")
        repeat = int(m.group(2) or 1)
        if node < repeat:
            return int(m.group(1))
        node -= repeat
    return None


def split_endpoint(endpoint: str, default_port: int | None) -> tuple[str, str | None]:
    """(host, port) as torch reads a rendezvous endpoint (``parse_rendezvous_endpoint`` in
    torch/distributed/elastic/rendezvous/utils.py): ``[v6]`` alone is a host; otherwise the text after
    the last colon is the port, so ``::1:29500`` is ``::1`` port 29500 (what torchrun writes for an IPv6
    ``--master-addr``) and a bare ``fd00::1`` is host ``fd00:`` port 1, which is where torch connects."""
    endpoint = endpoint.strip()
    if not endpoint:
        return "localhost", str(default_port) if default_port else None
    host, sep, port = ("", "", "") if endpoint[0] == "[" and endpoint[-1] == "]" else endpoint.rpartition(":")
    if not sep:
        host, port = endpoint, str(default_port) if default_port else ""
    if len(host) > 1 and host[0] == "[" and host[-1] == "]":
        host = host[1:-1]
    return host, port or None


def detect_launcher(env: dict[str, str]) -> Launcher:
    if "TORCHELASTIC_RUN_ID" in env or "GROUP_RANK" in env:
        return "torchrun"
    if "CROSS_RANK" in env and "RANK" in env:
        return "deepspeed"
    if "FLUX_TASK_RANK" in env:  # before mpich: Flux's shell also serves PMI (PMI_RANK) to MPI tasks
        return "flux"
    if "OMPI_COMM_WORLD_RANK" in env:
        return "mpi"
    if "PMI_RANK" in env or "MPI_LOCALRANKID" in env:
        return "mpich"
    if "LWS_WORKER_INDEX" in env:
        return "lws"
    if "PET_NNODES" in env or "PET_NODE_RANK" in env or "PET_MASTER_ADDR" in env or KUBEFLOW_TYPE in env:
        # v1 sets MASTER_ADDR/RANK (Master replica) or PET_RDZV_ENDPOINT (elasticPolicy); Trainer
        # v2 only PET_MASTER_ADDR/PET_MASTER_PORT (reference §1.4); v1 init containers get the
        # replica labels from the downward API (docs/kubernetes.md)
        v1 = ("MASTER_ADDR", "RANK", "PET_RDZV_ENDPOINT", KUBEFLOW_TYPE)
        return "kubeflow" if any(k in env for k in v1) else "trainer"
    if "JOB_COMPLETION_INDEX" in env:
        return "jobset" if any(k.startswith("JOBSET_") for k in env) else "indexed-job"
    if "SLURM_PROCID" in env:
        return "slurm"
    if "RANK" in env or "WORLD_SIZE" in env:
        return "env"
    return "none"


# Which variables carry each field of the launch contract, per launcher that sets them (the first
# one set wins), then the ones every launcher may set (torchrun's PET_* fallbacks as Kubeflow and
# Trainer inject them into pods, and what init_process_group(env://) reads), read last so they
# override. ``detect_launcher`` says which entry applies. The agent keeps only the variables its
# filter passes (agent/probe.py ALLOW_PREFIXES, ALLOW_NAMES) and decides rank 0 by RANK0_ENV:
# tests/facts/test_launch_table.py holds both against this table.
Fields = tuple[tuple[str, tuple[str, ...]], ...]
ENV_FIELDS: dict[Launcher, Fields] = {
    "slurm": (("rank", ("SLURM_PROCID",)), ("local_rank", ("SLURM_LOCALID",)),
              ("world_size", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")), ("node_rank", ("SLURM_NODEID",)),
              ("nnodes", ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"))),
    "mpi": (("rank", ("OMPI_COMM_WORLD_RANK",)), ("world_size", ("OMPI_COMM_WORLD_SIZE",)),
            ("local_rank", ("OMPI_COMM_WORLD_LOCAL_RANK",)), ("local_world_size", ("OMPI_COMM_WORLD_LOCAL_SIZE",))),
    "mpich": (("rank", ("PMI_RANK",)), ("world_size", ("PMI_SIZE",)), ("local_rank", ("MPI_LOCALRANKID",)),
              ("local_world_size", ("MPI_LOCALNRANKS",))),
    "flux": (("rank", ("FLUX_TASK_RANK",)), ("world_size", ("FLUX_JOB_SIZE",)), ("local_rank", ("FLUX_TASK_LOCAL_ID",)),
             ("nnodes", ("FLUX_JOB_NNODES",))),
    "deepspeed": (("node_rank", ("CROSS_RANK",)), ("nnodes", ("CROSS_SIZE",)), ("local_world_size", ("LOCAL_SIZE",))),
    "lws": (("node_rank", ("LWS_WORKER_INDEX",)), ("nnodes", ("LWS_GROUP_SIZE",)), ("master_addr", ("LWS_LEADER_ADDRESS",))),
    "indexed-job": (("node_rank", ("JOB_COMPLETION_INDEX",)),),
    "jobset": (("node_rank", ("JOB_COMPLETION_INDEX",)),),
}  # fmt: skip
PET_FIELDS: Fields = (
    ("node_rank", ("PET_NODE_RANK",)), ("nnodes", ("PET_NNODES",)), ("local_world_size", ("PET_NPROC_PER_NODE",)),
    ("master_addr", ("PET_MASTER_ADDR",)), ("master_port", ("PET_MASTER_PORT",)),
    ("rdzv_backend", ("PET_RDZV_BACKEND",)), ("rdzv_endpoint", ("PET_RDZV_ENDPOINT",)), ("rdzv_id", ("PET_RDZV_ID",)),
)  # fmt: skip
TORCH_FIELDS: Fields = (
    ("rank", ("RANK",)), ("local_rank", ("LOCAL_RANK",)), ("world_size", ("WORLD_SIZE",)),
    ("local_world_size", ("LOCAL_WORLD_SIZE",)), ("node_rank", ("GROUP_RANK", "NODE_RANK")),
    ("nnodes", ("GROUP_WORLD_SIZE", "NNODES")), ("master_addr", ("MASTER_ADDR",)), ("master_port", ("MASTER_PORT",)),
    ("rdzv_id", ("TORCHELASTIC_RUN_ID",)),
)  # fmt: skip
TASKS_PER_NODE = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")  # srun: local_world_size, from node_rank


def _read(c: Contract, env: dict[str, str], fields: Fields, skip: tuple[str, ...] = ()) -> None:
    for field, names in fields:
        if field not in skip:
            c.env(field, env, *names)


def _slurm_tasks(c: Contract, env: dict[str, str]) -> None:
    for name in TASKS_PER_NODE:
        if name in env and "node_rank" in c.values:
            try:
                count = tasks_on_node(env[name], c.values["node_rank"]) if c.values["node_rank"] >= 0 else None
            except ValueError:
                c.invalid[f"env:{name}"] = env[name][:200]
                break
            if count is not None:
                c.set("local_world_size", str(count), f"env:{name}")
            break


def _from_env(c: Contract, env: dict[str, str], launcher: Launcher) -> None:
    """Launcher-specific variables first (ENV_FIELDS); the generic torch ones (read last) override them."""
    if launcher == "slurm" or "SLURM_PROCID" in env:  # srun's variables under another launcher too
        _read(c, env, ENV_FIELDS["slurm"])
        _slurm_tasks(c, env)
    if launcher != "slurm":
        _read(c, env, ENV_FIELDS.get(launcher, ()))
    for field, raw, source in pod_contract(launcher, env):  # pods: node rank from replica labels
        c.set(field, raw, source)
    _read(c, env, PET_FIELDS)
    # Kubeflow v1 with nprocPerNode > 1: the pod's RANK is a node rank while WORLD_SIZE counts
    # processes; torchrun re-derives both from PET_*, so RANK is not this process's rank.
    kubeflow_nodes = launcher == "kubeflow" and _int(env.get("PET_NPROC_PER_NODE"), 1) > 1
    _read(c, env, TORCH_FIELDS, skip=("rank",) if kubeflow_nodes else ())
    endpoint = c.values.get("rdzv_endpoint")
    if endpoint and "master_addr" not in c.values:  # elastic pods: every node must reach the c10d store
        host, port = split_endpoint(str(endpoint), C10D_DEFAULT_PORT)
        c.set("master_addr", host, c.sources["rdzv_endpoint"])
        if "master_port" not in c.values:
            c.set("master_port", port, c.sources["rdzv_endpoint"])


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _from_torchrun(c: Contract, env: dict[str, str], opts: dict[str, str]) -> None:
    """The contract a wrapped torchrun will use: command line, then PET_*, then defaults."""

    def value(dest: str) -> tuple[str | None, str]:
        if dest in opts:
            return opts[dest], f"torchrun:--{dest.replace('_', '-')}"
        pet = f"PET_{dest.upper()}"
        if pet in env:
            return env[pet], f"env:{pet}"
        return TORCHRUN_DEFAULTS.get(dest), f"torchrun default --{dest.replace('_', '-')}"

    for dest in ("nnodes", "nproc_per_node", "node_rank", "master_port", "max_restarts"):
        if opts.get(dest) == "":  # `--node-rank=$UNSET`: torchrun exits with "invalid int value: ''"
            c.invalid[f"torchrun:--{dest.replace('_', '-')}"] = ""
    standalone = opts.get("standalone") == "1" or env.get("PET_STANDALONE", "0") not in ("", "0")
    nnodes, src = value("nnodes")
    if standalone:
        nnodes, src = "1", "torchrun --standalone"
    c.set("nnodes", nnodes, src)
    nproc, src = value("nproc_per_node")
    if nproc is not None and nproc.isdecimal():
        c.set("local_world_size", nproc, src)
    elif nproc is not None:
        c.values.pop("local_world_size", None)  # auto/gpu/cpu: decided by torchrun at start
    backend, src = value("rdzv_backend")
    if standalone:
        backend, src = "c10d", "torchrun --standalone"
    c.set("rdzv_backend", backend, src)
    rdzv_id, src = value("rdzv_id")
    c.set("rdzv_id", rdzv_id, src)
    endpoint, esrc = value("rdzv_endpoint")
    if standalone:
        endpoint, esrc = "localhost:0", "torchrun --standalone"
    if backend == "static":
        node_rank, src = value("node_rank")
        c.set("node_rank", node_rank, src)
        if endpoint:
            host, port = split_endpoint(endpoint, None)
            c.set("master_addr", host, esrc)
            c.set("master_port", port, esrc)
            if port is None:  # torch's static handler: "Port is absent in endpoint", on every node
                c.invalid[f"{esrc} without a port (the static rendezvous needs one)"] = endpoint[:200]
        else:
            for dest in ("master_addr", "master_port"):
                v, src = value(dest)
                c.set(dest, v, src)
    else:  # c10d/etcd: node ranks are assigned at rendezvous (torchrun ignores --node-rank)
        c.values.pop("node_rank", None)
        c.sources.pop("node_rank", None)
        if endpoint or backend == "c10d":  # torch reads a missing endpoint as localhost:29400 (each node its own)
            host, port = split_endpoint(endpoint or "", C10D_DEFAULT_PORT)
            c.set("master_addr", host, esrc)
            c.set("master_port", port, esrc)
    if endpoint:
        c.set("rdzv_endpoint", endpoint, esrc)
    for key in ("rank", "local_rank"):  # torchrun assigns these to its workers
        c.values.pop(key, None)
        c.sources.pop(key, None)
    n, lws = c.values.get("nnodes"), c.values.get("local_world_size")
    if isinstance(n, int) and isinstance(lws, int):
        c.set("world_size", str(n * lws), "derived: nnodes x nproc-per-node")
    else:  # torchrun sets its workers' WORLD_SIZE itself; an inherited one is not what they get
        c.values.pop("world_size", None)


def _from_deepspeed(c: Contract, opts: dict[str, str]) -> None:
    for dest, field in (
        ("num_nodes", "nnodes"),
        ("num_gpus", "local_world_size"),
        ("node_rank", "node_rank"),
        ("master_addr", "master_addr"),
        ("master_port", "master_port"),
    ):
        if dest in opts:
            c.set(field, opts[dest], f"deepspeed:--{dest}")
    c.values.pop("rank", None)
    c.values.pop("local_rank", None)


FROM_CONFIG = ("num_machines", "machine_rank", "num_processes", "main_process_ip", "main_process_port")


def _from_accelerate(c: Contract, opts: dict[str, str], configs: Any) -> None:
    """`accelerate launch` runs torchrun's launcher with this contract (accelerate 1.15,
    utils/launch.py prepare_multi_gpu_env): nproc = num_processes // num_machines, node rank =
    machine_rank, and across machines the main process as the endpoint unless --same_network.
    Each value from its command line, else from its config file (--config_file, else the default
    one `accelerate config` wrote: commands/launch.py _validate_launch_command fills only the
    options left None, FROM_CONFIG; --rdzv_backend defaults to static and --same_network to False,
    so a config's values of those never apply), else accelerate's default."""
    from validator.facts.layout import accelerate_config

    entries = [e for e in configs if isinstance(e, dict)] if isinstance(configs, list) else []
    values, where = accelerate_config(entries, opts)
    if values.get("compute_environment", "LOCAL_MACHINE") != "LOCAL_MACHINE":
        values = {}  # accelerate applies a config's values to its options on a local machine only (not SageMaker)

    def opt(dest: str, default: str) -> tuple[str, str]:
        if dest in opts:
            return opts[dest], f"accelerate:--{dest}"
        if dest in FROM_CONFIG and values.get(dest) is not None and not isinstance(values[dest], (dict, list)):
            return str(values[dest]), f"accelerate config {where}: {dest}"
        return default, f"accelerate default --{dest}"

    machines, src = opt("num_machines", "1")
    c.set("nnodes", machines, src)
    c.set("node_rank", *opt("machine_rank", "0"))
    backend, bsrc = opt("rdzv_backend", "static")
    c.set("rdzv_backend", backend, bsrc)
    addr, asrc = opt("main_process_ip", "127.0.0.1")
    port, psrc = opt("main_process_port", "29500")
    c.set("master_addr", addr, asrc)
    c.set("master_port", port, psrc)
    if machines.strip() not in ("", "1") and "same_network" not in opts:
        c.set("rdzv_endpoint", f"{addr}:{port}", asrc)
    procs, procs_src = opt("num_processes", "")
    n = c.values.get("nnodes")
    if procs.strip().isdecimal() and isinstance(n, int) and n > 0:
        c.set("world_size", procs, procs_src)
        c.set("local_world_size", str(int(procs) // n), "derived: num_processes / num_machines")
    if backend != "static":  # node ranks are assigned at rendezvous, as with torchrun
        c.values.pop("node_rank", None)
        c.sources.pop("node_rank", None)
    for key in ("rank", "local_rank"):
        c.values.pop(key, None)
        c.sources.pop(key, None)


def job_identity(env: dict[str, str], c: Contract) -> tuple[str | None, str]:
    for name in ("VALIDATOR_JOB_ID", "SLURM_JOB_ID", "SLURM_JOBID", "FLUX_JOB_ID"):
        if env.get(name):
            return env[name], f"env:{name}"
    rid = c.values.get("rdzv_id")
    if rid and rid != "none":
        return str(rid), c.sources["rdzv_id"]
    for name in ("JOBSET_NAME", "KUBEFLOW_JOB_NAME"):
        if env.get(name):
            return env[name], f"env:{name}"
    return None, ""


def parse_launch(env: dict[str, str], command: CommandFacts | None, configs: Any = None) -> LaunchFacts:
    """The launch contract from the environment and the wrapped command; ``configs``: the
    configuration files the agent read for it (probe.job_configs), of which accelerate's config
    gives its launch values."""
    launcher = detect_launcher(env)
    c = Contract()
    _from_env(c, env, launcher)
    mode = "rank" if "rank" in c.values else "node"
    if command and command["tool"] == "torchrun":
        launcher, mode = "torchrun", "node"
        _from_torchrun(c, env, command["options"])
    elif command and command["tool"] == "deepspeed":
        launcher, mode = "deepspeed", "node"
        _from_deepspeed(c, command["options"])
    elif command and command["tool"] == "accelerate":  # runs torchrun's launcher: the same contract
        launcher, mode = "torchrun", "node"
        _from_accelerate(c, command["options"], configs)
    job_id, job_src = job_identity(env, c)
    if job_id:
        c.values["job_id"] = job_id
        c.sources["job_id"] = job_src
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    v = c.values
    nodelist = nodelist or pod_hosts(env, v.get("master_addr"), v.get("nnodes"))
    return {
        "launcher": launcher,
        "mode": mode,
        "rank": v.get("rank"),
        "local_rank": v.get("local_rank"),
        "world_size": v.get("world_size"),
        "local_world_size": v.get("local_world_size"),
        "node_rank": v.get("node_rank"),
        "nnodes": v.get("nnodes"),
        "master_addr": v.get("master_addr"),
        "master_port": v.get("master_port"),
        "rdzv_backend": v.get("rdzv_backend"),
        "rdzv_endpoint": v.get("rdzv_endpoint"),
        "rdzv_id": v.get("rdzv_id"),
        "job_id": v.get("job_id"),
        "nodelist": nodelist,
        "sources": {k: c.sources[k] for k in v if k in c.sources},
        "invalid": c.invalid,
        "command": command,
        "layout": None,  # facts/layout.py fills it in (validator.facts.parse)
    }
