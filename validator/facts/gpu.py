"""GPUs from NVML, ``nvidia-smi --query-gpu ... --format=csv`` or /proc/driver/nvidia, the
CUDA_VISIBLE_DEVICES mapping (indices, UUIDs or their unique prefixes, MIG UUIDs), and the
evidence that a job uses GPUs at all (``gpu_evidence``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import CommandFacts, Facts, GpuDevice, GpuFacts, GpuHealth, GpuHealthFacts, XidEvent


NO_GPUS: GpuFacts = {
    "source": "none",
    "driver": None,
    "cuda": None,
    "devices": [],
    "visible": None,
    "visible_error": None,
    "health": None,
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


def visible_count(g: GpuFacts) -> int:
    """The GPUs a rank may use, as torch.cuda.device_count() counts them (``g``: its ``gpus``
    facts): the visible ones after CUDA_VISIBLE_DEVICES, else all."""
    return len(g["visible"]) if g["visible"] is not None else len(g["devices"])


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
        "health": parse_health(raw, devices),
    }


# ----------------------------------------------------------------------------- health

# Clocks-event (formerly throttle) reason bits, nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h,
# nvmlClocksEventReason*), named as nvidia-smi's clocks_event_reasons.* fields name them.
REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}  # fmt: skip
HEALTH_MAX = 64  # GPUs and Xid events read from one node at most (the node's words are hostile)
COUNT_MAX = (1 << 64) - 1  # an ECC counter is an unsigned long long
PCIE_GEN_MAX, PCIE_WIDTH_MAX = 32, 64  # beyond: garbage, read as unknown
XID_TEXT = 200
SMI_KEYS = {  # nvidia-smi --query-gpu field -> GpuHealth key
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected_volatile",
    "ecc.errors.corrected.volatile.total": "ecc_corrected_volatile",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_aggregate",
    "ecc.errors.corrected.aggregate.total": "ecc_corrected_aggregate",
    "retired_pages.pending": "retired_pending",
    "remapped_rows.pending": "remap_pending",
    "remapped_rows.failure": "remap_failure",
    "clocks_event_reasons.active": "clock_reasons",
    "clocks_throttle_reasons.active": "clock_reasons",
    "pcie.link.gen.current": "pcie_gen",
    "pcie.link.gen.max": "pcie_gen_max",
    "pcie.link.width.current": "pcie_width",
    "pcie.link.width.max": "pcie_width_max",
}
XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?\): (\d{1,4})\b,?\s*(.*)"
)


def _count(x: Any, top: int = COUNT_MAX) -> int | None:
    """A counter from NVML (an int) or nvidia-smi (digits): anything else is unknown, never 0."""
    if isinstance(x, str):
        x = int(x) if re.fullmatch(r"\d{1,20}", x.strip()) else None
    return x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= top else None


def _flag(x: Any) -> bool | None:
    """Yes/No (nvidia-smi) or 0/1 (NVML); [N/A] and anything else: unknown."""
    if isinstance(x, str):
        return {"yes": True, "no": False, "1": True, "0": False}.get(x.strip().lower())
    n = _count(x, 1)
    return None if n is None else bool(n)


def reason_names(mask: Any) -> list[str] | None:
    """The clocks-event bitmask (an int, or nvidia-smi's ``0x0000000000000001``) as names; an
    unknown bit by its value (``0x200``)."""
    if isinstance(mask, str):
        mask = int(mask.strip(), 16) if re.fullmatch(r"0x[0-9a-fA-F]{1,16}", mask.strip()) else None
    if _count(mask) is None:
        return None
    return [REASONS.get(1 << b, hex(1 << b)) for b in range(64) if mask >> b & 1]


def _health(index: int, values: dict[str, Any]) -> GpuHealth:
    rows = values.get("remapped_rows")  # NVML: [correctable, uncorrectable, pending, failure]
    rows = rows if isinstance(rows, list) and len(rows) == 4 else [None] * 4
    return {
        "index": index,
        "ecc_uncorrected_volatile": _count(values.get("ecc_uncorrected_volatile")),
        "ecc_corrected_volatile": _count(values.get("ecc_corrected_volatile")),
        "ecc_uncorrected_aggregate": _count(values.get("ecc_uncorrected_aggregate")),
        "ecc_corrected_aggregate": _count(values.get("ecc_corrected_aggregate")),
        "retired_pending": _flag(values.get("retired_pending")),
        "remap_pending": _flag(values.get("remap_pending", rows[2])),
        "remap_failure": _flag(values.get("remap_failure", rows[3])),
        "clock_reasons": reason_names(values.get("clock_reasons", values.get("clocks_event_reasons"))),
        "pcie_gen": _count(values.get("pcie_gen"), PCIE_GEN_MAX),
        "pcie_gen_max": _count(values.get("pcie_gen_max"), PCIE_GEN_MAX),
        "pcie_width": _count(values.get("pcie_width"), PCIE_WIDTH_MAX),
        "pcie_width_max": _count(values.get("pcie_width_max"), PCIE_WIDTH_MAX),
    }


def health_from_nvml(d: dict[str, Any]) -> list[GpuHealth]:
    out = []
    for g in d.get("devices", [])[:HEALTH_MAX]:
        values = g.get("health")
        if isinstance(values, dict) and "error" not in values and isinstance(g.get("index"), int):
            out.append(_health(g["index"], values))
    return out


def health_from_smi(d: dict[str, Any]) -> list[GpuHealth]:
    """``--query-gpu=<the agent's health query> --format=csv,noheader,nounits``: one row a GPU."""
    h = d.get("health")
    if not isinstance(h, dict) or not isinstance(h.get("csv"), str) or not isinstance(h.get("query"), str):
        return []
    fields = h["query"].split(",")
    out = []
    for line in [ln for ln in h["csv"].splitlines() if ln.strip()][:HEALTH_MAX]:
        row = dict(zip(fields, (c.strip() for c in line.split(",")), strict=False))
        index = _count(row.get("index", ""), 1 << 16)
        if index is not None:
            out.append(_health(index, {SMI_KEYS[k]: v for k, v in row.items() if k in SMI_KEYS}))
    return out


def parse_xid(raw: Any, devices: list[GpuDevice]) -> tuple[list[XidEvent] | None, str | None, str | None]:
    """The agent's Xid lines (``[age, line]``) as events; (None, None, why) where the log was unreadable."""
    if not isinstance(raw, dict):
        return None, None, None
    if not isinstance(raw.get("events"), list):
        return None, None, str(raw.get("error") or "not read")[:300]
    by_bus = {d["pci_bus_id"]: d["index"] for d in devices}
    events: list[XidEvent] = []
    for item in raw["events"][-HEALTH_MAX:]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
            continue
        m = XID_LINE.search(item[1])
        if not m:
            continue
        domain, bus, dev, fn, xid, text = m.groups()
        bus_id = f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn or 0}"
        age = item[0] if isinstance(item[0], (int, float)) and not isinstance(item[0], bool) else None
        events.append({
            "xid": int(xid),
            "pci_bus_id": bus_id,
            "index": by_bus.get(bus_id),
            "age_s": max(0.0, float(age)) if age is not None and abs(age) < 1e10 else None,
            "text": text.strip()[:XID_TEXT],
        })  # fmt: skip
    source = raw.get("source")
    return events, source[:40] if isinstance(source, str) else None, None


def parse_health(raw: dict[str, Any], devices: list[GpuDevice]) -> GpuHealthFacts | None:
    """Health counters and Xid events; None where the agent read neither (an older agent)."""
    data = raw.get("data") or {}
    found = health_from_nvml(data) if raw["source"] == "nvml" else health_from_smi(data)
    if not found and "xid" not in raw:
        return None
    xid, source, error = parse_xid(raw.get("xid"), devices)
    return {"devices": found, "xid": xid, "xid_source": source, "xid_error": error}


class GpuEvidence:  # a plain class: every participant imports this module (test_lean.py)
    """Why a job counts as a GPU job: ``what`` (``--backend nccl``) and ``where`` it was seen (the
    host, the profile); ``node``: a node's own GPUs or driver (then a node without GPUs may be
    broken), else only the job's configuration."""

    __slots__ = ("node", "what", "where")

    def __init__(self, what: str, where: str, node: bool) -> None:
        self.what, self.where, self.node = what, where, node

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GpuEvidence):
            return NotImplemented
        return (self.what, self.where, self.node) == (other.what, other.where, other.node)

    def __repr__(self) -> str:
        return f"GpuEvidence({self.what!r}, {self.where!r}, {self.node!r})"


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
