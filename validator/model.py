"""The shared vocabulary: facts (what a node or rank sees), findings, severities, reports.

Facts are plain JSON-shaped dicts (``TypedDict``): they travel between processes and hosts as
JSON, a 100,000-rank job holds 100,000 of them, and plain dicts cost nothing to load.
``validate_facts`` checks a document against this schema before any check sees it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from validator import FACTS_SCHEMA as FACTS_SCHEMA  # re-exported: defined where start-up need not load this module
from validator import REPORT_SCHEMA as REPORT_SCHEMA
from validator import documents
from validator.severity import Severity as Severity

# How a participant was started (facts/launch.py detects it; profiles pin it). Add a launcher here,
# then teach facts/launch.py to detect it (and facts/k8s.py if it starts pods).
Launcher = Literal[
    "torchrun", "slurm", "kubeflow", "trainer", "jobset", "lws", "indexed-job", "mpi", "mpich", "flux", "deepspeed",
    "env", "none",
]  # fmt: skip
LAUNCHERS: tuple[Launcher, ...] = typing.get_args(Launcher)


# --------------------------------------------------------------------------- facts


class CommandFacts(TypedDict):
    tool: str  # torchrun | deepspeed | accelerate | python | other
    argv: list[str]
    options: dict[str, str]  # normalised option name (torchrun dest, e.g. nproc_per_node) -> value
    script: str | None
    errors: list[str]


class LayoutFacts(TypedDict):
    """The parallel layout the job's own configuration asks for (facts/layout.py, docs/layout.md)."""

    framework: str  # megatron | nemo | torchtitan | deepspeed | explicit
    source: str  # where it was read ("argv", "--deepspeed_config ds.json", "VALIDATOR_LAYOUT")
    degrees: dict[str, int]  # tp pp cp ep etp dp dp_shard dp_replicate vpp, as given (-1: inferred)
    sizes: dict[str, int]  # layers layers_per_vstage global_batch micro_batch grad_acc zero_stage uneven
    order: str  # rank order, innermost first ("tp-cp-ep-dp-pp")
    errors: list[str]  # what could not be read: "--deepspeed_config ds.json: no such file"


class LaunchFacts(TypedDict):
    launcher: str  # a Launcher; str in the schema: a newer agent's launcher is still a document
    mode: str  # "rank": this participant is one worker; "node": one agent per node (wrapper)
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    node_rank: int | None
    nnodes: int | None
    master_addr: str | None
    master_port: int | None
    rdzv_backend: str | None
    rdzv_endpoint: str | None
    rdzv_id: str | None
    job_id: str | None
    nodelist: str | None  # hostlist expression of the job's nodes, when the launcher tells
    sources: dict[str, str]  # field -> where it came from ("env:RANK", "torchrun:--nnodes", ...)
    invalid: dict[str, str]  # variable or option -> raw value that could not be parsed
    command: CommandFacts | None
    layout: LayoutFacts | None  # null: the job's configuration names no parallel layout


class GpuDevice(TypedDict):
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    memory_mib: int | None
    mig_uuids: list[str]


class GpuHealth(TypedDict):
    """One GPU's health counters (docs/facts.md, "GpuHealth"); null: unknown (the device has no such
    counter, nvidia-smi said [N/A] or [Not Supported]), never 0."""

    index: int
    ecc_uncorrected_volatile: int | None  # since the driver loaded
    ecc_corrected_volatile: int | None
    ecc_uncorrected_aggregate: int | None  # over the device's life
    ecc_corrected_aggregate: int | None
    retired_pending: bool | None  # pages waiting for a reset to be retired (before Ampere)
    remap_pending: bool | None  # rows waiting for a reset to be remapped (Ampere and newer)
    remap_failure: bool | None  # a row remapping ever failed
    clock_reasons: list[str] | None  # active clocks-event (throttle) reasons by name: gpu_idle, hw_slowdown, ...
    pcie_gen: int | None  # PCIe link generation now
    pcie_gen_max: int | None  # the most this device and slot can do
    pcie_width: int | None  # lanes now
    pcie_width_max: int | None


class XidEvent(TypedDict):
    xid: int
    pci_bus_id: str  # 0000:18:00.0
    index: int | None  # the GPU at that address on this node, when known
    age_s: float | None  # seconds since the kernel logged it (null: no timestamp)
    text: str  # the driver's words after the number, at most 200 characters


class GpuHealthFacts(TypedDict):
    devices: list[GpuHealth]
    xid: list[XidEvent] | None  # null: the kernel log was not readable
    xid_source: str | None  # /dev/kmsg | dmesg
    xid_error: str | None  # why the kernel log was not readable


class GpuFacts(TypedDict):
    source: str  # nvml | nvidia-smi | proc | none
    driver: str | None
    cuda: str | None  # CUDA version the driver supports
    devices: list[GpuDevice]
    visible: list[str] | None  # UUIDs this process may use, in CUDA order (None: all)
    visible_error: str | None
    health: GpuHealthFacts | None  # null: not collected (no GPU stack, an older agent)


class Interface(TypedDict):
    name: str
    addrs: list[str]  # CIDR, IPv4 first as the kernel lists them
    up: bool
    running: bool
    loopback: bool
    virtual: bool
    kind: str | None  # bridge, veth, ... when the kernel says
    mtu: int | None
    speed_mbps: int | None


class Selection(TypedDict):
    ifaces: list[str]  # what the library would use, in its order
    addr: str | None  # the address it would bind/advertise first
    rule: str  # which rule chose them ("NCCL_SOCKET_IFNAME=^docker", "default: not docker/lo/virbr")
    error: str | None  # the library's own failure, when it would fail


class MasterFacts(TypedDict):
    addr: str
    resolved: list[str]
    error: str | None
    loopback: bool
    local: bool  # one of this node's own addresses
    route_dev: str | None
    route_src: str | None
    port: int | None
    port_free: bool | None  # only probed when this node is the master
    port_owner: str | None


class NetworkFacts(TypedDict):
    interfaces: list[Interface]
    nccl: Selection
    gloo: Selection
    master: MasterFacts | None


class SoftwareFacts(TypedDict):
    python: str
    torch: str | None
    torch_cuda: str | None
    nccl: str | None  # version of the NCCL library that would load
    nccl_path: str | None
    deepspeed: str | None
    transformers: str | None


class SystemFacts(TypedDict):
    shm_bytes: int | None
    memlock_soft: int | None  # -1: unlimited
    memlock_hard: int | None
    nofile_soft: int | None
    nofile_hard: int | None
    somaxconn: int | None
    ib_devices: list[str]
    time: float


class IbPort(TypedDict):
    device: str  # mlx5_0
    port: int
    name: str  # "mlx5_0:1", as NCCL prints it
    state: str | None  # ACTIVE, DOWN, INIT, ARMED (sysfs "4: ACTIVE")
    phys_state: str | None  # LinkUp, Polling, Disabled, ... (sysfs "5: LinkUp")
    rate: str | None  # as sysfs says: "200 Gb/sec (4X HDR)"
    rate_gbps: float | None
    link_layer: str | None  # InfiniBand | Ethernet (RoCE)
    netdev: str | None  # the netdev behind the port (RoCE: of its GIDs; else the device's first)
    roce_v2: bool | None  # RoCE: a RoCE v2 GID with a routable address exists; null on InfiniBand
    gid_ok: bool | None  # RoCE: NCCL would find its GID (NCCL_IB_GID_INDEX's, or one of its own choice); null on IB
    selected: bool  # NCCL_IB_HCA matches it (whatever its state)
    used: bool  # NCCL would use it: selected, ACTIVE, InfiniBand or Ethernet, IB not disabled


class IbDevice(TypedDict):
    name: str
    node_guid: str | None
    fw_ver: str | None
    ports: list[IbPort]


class IbFacts(TypedDict):
    devices: list[IbDevice]
    transport: str  # what NCCL's net would be: IB | Socket | the NCCL_NET plugin name
    rule: str  # why: "NCCL_IB_DISABLE=1", "NCCL_IB_HCA=mlx5_9 matches no active port", "default: IB"
    hca: str | None  # NCCL_IB_HCA as given
    used: list[str]  # ports NCCL would use, in its order ("mlx5_0:1")
    gid_index: int | None  # NCCL_IB_GID_INDEX
    error: str | None  # NCCL's own failure when it would fail


class Facts(TypedDict):
    schema: int
    kind: str  # "facts"
    validator: str
    host: str  # the node's name as the scheduler knows it (SLURMD_NODENAME, pod name, hostname)
    hostname: str
    pid: int
    probe_ms: float
    errors: dict[str, str]  # collector -> error; a failed collector never fails the probe
    launch: LaunchFacts
    gpus: GpuFacts
    network: NetworkFacts
    software: SoftwareFacts
    system: SystemFacts
    env: dict[str, str]
    ib: IbFacts | None  # null: not collected (documents of older validators lack it: loaded as null)


# --------------------------------------------------------------------------- findings


# Reported, but never counted toward --fail-on: connections the preflight coordinator refused
# come from strangers as often as not, and strangers never change the job's verdict.
NEVER_FAILS = frozenset({"PRE004"})


@dataclass(slots=True)
class Finding:
    code: str
    severity: Severity
    title: str
    message: str
    ranks: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    expected: str | None = None
    actual: str | None = None
    fix: str = ""
    verify: str = ""

    def to_json(self) -> documents.FindingDoc:
        """Hosts and ranks are folded (``node[01-64]``, ``0-511,600``): a finding about half of a
        12,500-node job stays small. Expand with ``nodeset -e`` / ``scontrol show hostnames``."""
        from validator.targets import fold_hosts, fold_ranks

        return {
            "code": self.code,
            "severity": self.severity.json_label,
            "title": self.title,
            "message": self.message,
            "ranks": fold_ranks(self.ranks),
            "hosts": fold_hosts(self.hosts),
            "expected": self.expected,
            "actual": self.actual,
            "fix": self.fix,
            "verify": self.verify,
        }

    @classmethod
    def from_json(cls, d: typing.Mapping[str, Any]) -> Finding:
        from validator.targets import expand_ranks, unfold_hosts

        return cls(
            code=str(d["code"]),
            severity=Severity.parse(str(d["severity"])),
            title=str(d["title"]),
            message=str(d["message"]),
            ranks=expand_ranks(d.get("ranks") or ""),
            hosts=unfold_hosts(d["hosts"]) if d.get("hosts") else [],
            expected=d.get("expected"),
            actual=d.get("actual"),
            fix=str(d.get("fix") or ""),
            verify=str(d.get("verify") or ""),
        )


@dataclass(slots=True)
class Outcome:
    """A target that gave no usable facts: unreachable, timed out, unparsable, never arrived."""

    target: str  # host, file or rank
    status: str  # unreachable | timeout | auth | no-python | unparsed | missing | error
    detail: str

    def to_json(self) -> documents.OutcomeDoc:
        return {"target": self.target, "status": self.status, "detail": self.detail}


@dataclass(slots=True)
class Report:
    findings: list[Finding]
    participants: int  # facts documents checked
    hosts: list[str]  # distinct hosts seen
    outcomes: list[Outcome] = field(default_factory=list)
    input_errors: list[str] = field(default_factory=list)  # bad input: exit 2
    title: str = "cluster-validator"
    # the command's own sections, written after the common fields (documents.AnyReportDoc)
    scan: documents.ScanDoc | None = None  # `validator scan`: what it did
    drain: list[str] | None = None  # `validator scan`: the hosts to drain
    preflight: documents.PreflightDoc | None = None  # `preflight --net-check`, `--probes`: figures, what to take out
    diagnosis: documents.DiagnosisDoc | None = None  # `validator diagnose` and `rehearse`: the verdict
    layout: documents.LayoutDoc | None = None  # the parallel layout and its group map (docs/layout.md)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def worst(self) -> Severity | None:
        """The highest severity among findings that can fail a run (not NEVER_FAILS)."""
        return max((f.severity for f in self.findings if f.code not in NEVER_FAILS), default=None)

    def exit_code(self, fail_on: Severity | None = Severity.ERROR, allow_incomplete: bool = False) -> int:
        """2 bad input; 1 findings at or above ``fail_on``; 3 incomplete (targets unreachable,
        ranks that never arrived) unless allowed; 0 pass. Findings win over incompleteness: they
        are configuration to fix, while incomplete is often worth a retry (a late pod)."""
        from validator.errors import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE

        if self.input_errors:
            return EXIT_USAGE
        worst = self.worst()
        if fail_on is not None and worst is not None and worst >= fail_on:
            return EXIT_FINDINGS
        if self.outcomes and not allow_incomplete:
            return EXIT_INCOMPLETE
        return EXIT_OK

    def to_json(self) -> dict[str, Any]:
        """The JSON report (a plain dict, for callers that add their own keys)."""
        return typing.cast(dict[str, Any], self.document())

    def document(self) -> documents.AnyReportDoc:
        """The JSON report, typed: docs/schema/ is generated from ``documents.AnyReportDoc``."""
        from validator import __version__
        from validator.targets import fold_hosts

        doc: documents.AnyReportDoc = {
            "schema": REPORT_SCHEMA,
            "validator": __version__,
            "title": self.title,
            "participants": self.participants,
            "hosts": fold_hosts(self.hosts),
            "host_count": len(self.hosts),
            "summary": {
                "info": self.count(Severity.INFO),
                "warning": self.count(Severity.WARNING),
                "error": self.count(Severity.ERROR),
            },
            "findings": [f.to_json() for f in self.findings],
            "outcomes": [o.to_json() for o in self.outcomes],
            "input_errors": self.input_errors,
        }
        if self.scan is not None:
            doc["scan"] = self.scan
        if self.drain is not None:
            doc["drain"] = self.drain
        if self.preflight is not None:
            doc["preflight"] = self.preflight
        if self.diagnosis is not None:
            doc["diagnosis"] = self.diagnosis
        if self.layout is not None:
            doc["layout"] = self.layout
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Report:
        from validator.targets import unfold_hosts

        return cls(
            findings=[Finding.from_json(f) for f in d.get("findings", [])],
            participants=int(d.get("participants", 0)),
            hosts=unfold_hosts(d["hosts"]) if d.get("hosts") else [],
            outcomes=[Outcome(**o) for o in d.get("outcomes", [])],
            input_errors=[str(e) for e in d.get("input_errors", [])],
            title=str(d.get("title", "cluster-validator")),
            scan=d.get("scan"),
            drain=d.get("drain"),
            preflight=d.get("preflight"),
            diagnosis=d.get("diagnosis"),
            layout=d.get("layout"),
        )
