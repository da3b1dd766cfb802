"""GPUs from NVML, ``nvidia-smi --query-gpu ... --format=csv`` or /proc/driver/nvidia, the
CUDA_VISIBLE_DEVICES mapping (indices, UUIDs or their unique prefixes, MIG UUIDs), and the
evidence that a job uses GPUs at all (``gpu_evidence``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from validator.model import CommandFacts, Facts, GpuDevice, GpuFacts


NO_GPUS: GpuFacts = {
    "source": "none",
    "driver": None,
    "cuda": None,
    "devices": [],
    "visible": None,
    "visible_error": None,
}


def _mib(text: str) -> int | None:
    m = re.match(r"\s*(\d+)\s*(MiB)?", text)
    return int(m.group(1)) if m else None


def from_nvml(d: dict[str, Any]) -> tuple[list[GpuDevice], str | None, str | None]:
    devices: list[GpuDevice] = []
    for g in d.get("devices", []):
        total = g.get("memory_total")
        devices.append(
            {
                "index": int(g["index"]),
                "uuid": g["uuid"],
                "name": g["name"],
                "pci_bus_id": normalise_bus_id(g.get("pci_bus_id", "")),
                "memory_mib": int(total) // (1 << 20) if total is not None else None,
                "mig_uuids": list(g.get("mig", [])),
            }
        )
    code = d.get("cuda_driver_version")
    cuda = f"{code // 1000}.{code % 1000 // 10}" if isinstance(code, int) else None
    return devices, d.get("driver"), cuda


def from_smi_csv(d: dict[str, Any]) -> tuple[list[GpuDevice], str | None, str | None]:
    lines = [ln for ln in d["csv"].splitlines() if ln.strip()]
    if not lines:
        return [], None, None
    header = [h.strip().split(" ")[0] for h in lines[0].split(",")]
    if header[0] != "index":  # --format=csv,noheader: the agent's query order
        header = d.get("query", "index,uuid,name,pci.bus_id,memory.total,driver_version").split(",")
    else:
        lines = lines[1:]
    devices: list[GpuDevice] = []
    driver = None
    for line in lines:
        row = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
        devices.append(
            {
                "index": int(row["index"]),
                "uuid": row.get("uuid", ""),
                "name": row.get("name", ""),
                "pci_bus_id": normalise_bus_id(row.get("pci.bus_id", "")),
                "memory_mib": _mib(row.get("memory.total", "")),
                "mig_uuids": [],
            }
        )
        driver = row.get("driver_version") or driver
    return devices, driver, None


def from_proc(d: dict[str, Any]) -> tuple[list[GpuDevice], str | None, str | None]:
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", d.get("version", ""))
    devices: list[GpuDevice] = []
    for i, (bus, info) in enumerate(sorted(d.get("gpus", {}).items())):
        fields = dict((k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in info.splitlines()) if v)
        devices.append(
            {
                "index": i,
                "uuid": fields.get("GPU UUID", ""),
                "name": fields.get("Model", ""),
                "pci_bus_id": normalise_bus_id(fields.get("Bus Location", bus)),
                "memory_mib": None,
                "mig_uuids": [],
            }
        )
    return devices, m.group(1) if m else None, None


def normalise_bus_id(bus: str) -> str:
    """``00000000:18:00.0`` (NVML, nvidia-smi) and ``0000:18:00.0`` (/proc) -> ``0000:18:00.0``."""
    bus = bus.strip().lower()
    m = re.fullmatch(r"([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])", bus)
    return f"{int(m.group(1), 16):04x}:{m.group(2)}:{m.group(3)}.{m.group(4)}" if m else bus


PARSERS = {"nvml": from_nvml, "nvidia-smi": from_smi_csv, "proc": from_proc}


def map_visible(devices: list[GpuDevice], cvd: str | None) -> tuple[list[str] | None, str | None]:
    """CUDA_VISIBLE_DEVICES -> UUIDs in CUDA order. CUDA stops at the first invalid entry; a
    negative index is the documented way to stop there on purpose, not an error."""
    if cvd is None:
        return None, None
    entries = [e.strip() for e in cvd.split(",")] if cvd.strip() else []
    by_index = {d["index"]: d["uuid"] for d in devices}
    uuids = [d["uuid"] for d in devices] + [m for d in devices for m in d["mig_uuids"]]
    visible: list[str] = []
    for e in entries:
        if re.fullmatch(r"-\d+", e):
            break  # documented way to hide the rest ("0,2,-1,1" -> 0,2; MPICH sets -1 for no GPU)
        if re.fullmatch(r"\d+", e):
            if int(e) not in by_index:
                return (
                    visible,
                    f"CUDA_VISIBLE_DEVICES={cvd}: no GPU {e} on this node (CUDA ignores it and everything after it)",
                )
            visible.append(by_index[int(e)])
            continue
        matches = [u for u in uuids if e and u.startswith(e)]
        if len(matches) != 1:
            why = "matches no GPU" if not matches else "is ambiguous"
            return (
                visible,
                f"CUDA_VISIBLE_DEVICES={cvd}: {e} {why} on this node (CUDA ignores it and everything after it)",
            )
        visible.append(matches[0])
    if len(set(visible)) != len(visible):
        return visible, f"CUDA_VISIBLE_DEVICES={cvd} lists the same GPU twice"
    return visible, None


def parse_gpus(raw: dict[str, Any] | None, env: dict[str, str]) -> GpuFacts:
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if not raw:
        return {**NO_GPUS, "visible": [] if cvd is not None else None}
    devices, driver, cuda = PARSERS[raw["source"]](raw["data"])
    visible, err = map_visible(devices, cvd)
    return {
        "source": raw["source"],
        "driver": driver,
        "cuda": cuda,
        "devices": devices,
        "visible": visible,
        "visible_error": err,
    }


class GpuEvidence(NamedTuple):  # not a dataclass: every participant imports this module (test_lean)
    """Why a job counts as a GPU job: ``what`` (``--backend nccl``) and ``where`` it was seen (the
    host, the profile); ``node``: a node's own GPUs or driver (then a node without GPUs may be
    broken), else only the job's configuration."""

    what: str
    where: str
    node: bool


def gpu_evidence(facts: Sequence[Facts], gpus_per_node: int | None = None) -> GpuEvidence | None:
    """The evidence that the job uses GPUs, strongest first: a node with GPUs; a node whose NVIDIA
    driver answers without any (they fell off the bus); a profile's GPUs per node; a launch command
    that names a GPU backend (``gpu_launch``). None: a CPU (gloo) job. Environment variables alone
    (``NCCL_*``, ``CUDA_VISIBLE_DEVICES``) never count: many clusters export them for every job."""
    driver: Facts | None = None
    for f in facts:
        g = f["gpus"]
        if g["devices"]:
            return GpuEvidence(f"{len(g['devices'])} GPU(s)", f["host"], True)
        if driver is None and g["source"] != "none":
            driver = f
    if driver is not None:
        version = driver["gpus"]["driver"]
        return GpuEvidence(f"the NVIDIA driver{' ' + version if version else ''}", driver["host"], True)
    if gpus_per_node:
        return GpuEvidence(f"gpus_per_node: {gpus_per_node}", "the profile", False)
    seen: set[int] = set()  # launch sections shared between ranks (facts.share): each read once
    for f in facts:
        command = f["launch"]["command"]
        if command is not None and id(command) not in seen:
            seen.add(id(command))
            if named := gpu_launch(command):
                return GpuEvidence(named, f"the launch command on {f['host']}", False)
    return None


def gpu_launch(command: CommandFacts) -> str | None:
    """What in a launch command asks for GPUs: torchrun's ``--nproc-per-node=gpu``, or an option or
    ``key=value`` whose name ends in ``backend`` set to ``nccl``
    (``--backend nccl``, ``--dist-backend=nccl``, ``--ddp_backend nccl``, Megatron's
    ``--distributed-backend nccl``, a Hydra ``trainer.backend=nccl``). torch's own default
    ``cpu:gloo,cuda:nccl``, ``--nproc-per-node=auto`` and accelerate's ``--multi_gpu`` (its
    multi-process launcher, which runs a CPU job on gloo too) do not: they run on CPUs too."""
    options = command["options"]
    if command["tool"] == "torchrun" and options.get("nproc_per_node") == "gpu":
        return "--nproc-per-node=gpu"
    argv = command["argv"]
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if not eq:
            if not arg.startswith("-") or i + 1 >= len(argv):
                continue
            value = argv[i + 1]
        if name.lstrip("-").rsplit(".", 1)[-1].lower().endswith("backend") and value.strip().lower() == "nccl":
            return arg if eq else f"{arg} {value}"
    return None
