"""The JSON documents every report command prints (check, scan, preflight, node-check,
diagnose), as types: the ``to_json`` methods are checked against them (mypy), and the published
JSON Schema (docs/schema/, ``validator.schema``) is generated from them, next to the facts
``TypedDict``s in ``validator.model``."""

from __future__ import annotations

from typing import Literal, TypedDict


class FindingDoc(TypedDict):
    """One finding; hosts and ranks folded (``node[01-04]``, ``0-7,9``), empty when none."""

    code: str
    severity: Literal["info", "warning", "error"]
    title: str
    message: str
    ranks: str
    hosts: str
    expected: str | None
    actual: str | None
    fix: str
    verify: str


class OutcomeDoc(TypedDict):
    """A target that gave no usable facts (scan, preflight): exit code 3 unless allowed."""

    target: str
    status: str  # unreachable | timeout | auth | no-python | unparsed | missing | interrupted | error
    detail: str


class SummaryDoc(TypedDict):
    """Findings per severity."""

    info: int
    warning: int
    error: int


class SpreadDoc(TypedDict):
    """One figure over the net check's measured links (first round): median and spread."""

    median: float
    p10: float
    p90: float
    min: float
    max: float


class SweepDoc(TypedDict):
    """What `--net-check-pairs all` cost: the pairs off the rings, measured in rounds of disjoint pairs."""

    rounds: int
    pairs: int  # pairs measured (every pair the rings did not measure)
    seconds: float


class AllreduceDoc(TypedDict):
    """One pair's two-rank all_reduce after the net check named a node or link (netcheck/collective.py)."""

    pair: list[str]  # [rank 0's host, rank 1's host]
    role: str  # link: a named link | node: a named node and a known-good partner | control: two known-good nodes
    backend: str  # gloo | nccl ("" not measured)
    bytes: int  # of each measured all_reduce (0: not measured)
    busbw_gbps: float | None  # bus bandwidth as nccl-tests reports it (2 ranks: bytes / s); null: not measured
    error: str  # why not measured ("" measured)
    control: list[str]  # the control pair measured in the same round ([] none, or a control itself)


class NetCheckDoc(TypedDict):
    """What `--net-check` measured: counts, the links' figures, the suspects and what isolated them."""

    nodes: int  # nodes with a listener address
    probes: int  # connections made in the first round
    failed: int  # ... that failed
    measured: int  # links measured (latency and rate both ways)
    rtt_ms: SpreadDoc | None  # each link's latency: a low percentile of its round trips
    up_mbps: SpreadDoc | None  # each link's rate out: the second-fastest of four parts
    down_mbps: SpreadDoc | None  # ... and back
    suspects: int  # links slow in the first round (the rings), isolated in the rounds after it
    confirmed: int  # ... found slow: named by NET104, or explained by a slow node (NET105)
    rounds: int  # probe rounds: the rings, then the pairings with known-good nodes and re-measures
    pairs: Literal["rings", "all"]  # --net-check-pairs: the rings' links only, or every pair
    sweep: SweepDoc | None  # with all: what measuring the pairs off the rings cost (null: not run)
    allreduce: list[AllreduceDoc]  # the named nodes' and links' all_reduce beside a control pair ([] none measured)
    line: str  # "net check: 6 links, all within 3x of the median link (...)" or what it named


class ProbeNodeDoc(TypedDict):
    """One node's figures from the probes' first round ("DEVICE ENGINE" -> figure)."""

    host: str
    hardware: str  # its hardware type: the GPU model, else the CPU model ("" unknown); what baselines are keyed by
    compute: dict[str, float]  # GFLOP/s: "cpu python", "cpu torch-cpu", "cuda:0 torch-cuda-fp16"
    memory: dict[str, float]  # GB/s: "host copy", "cuda:0 device-copy", "cuda:0 host-to-device"
    named: list[str]  # the probes that named it slow: compute, memory
    against: dict[str, list[str]]  # per probe that named it, what said so: "baseline", "peers"


class ProbeStatDoc(TypedDict):
    """One figure over the peers (the nodes of one hardware type): median and MAD, the suspects, the
    nodes named after two rounds alone."""

    kind: str  # compute | memory
    key: str  # "DEVICE ENGINE"
    hardware: str  # the peers' hardware type: the GPU model, else the CPU model ("" unknown)
    unit: str  # GFLOP/s | GB/s
    nodes: int
    median: float
    mad: float
    suspects: list[str]
    named: list[str]


class ProbeBaselineDoc(TypedDict):
    """One figure of the profile's baseline for a hardware type (`validator baseline record`), the
    nodes of that hardware held to it, those under it in the first round and those it named."""

    hardware: str  # "NVIDIA H100 80GB HBM3", or a CPU model
    kind: str  # compute | memory
    key: str  # "DEVICE ENGINE"
    unit: str  # GFLOP/s | GB/s
    median: float  # as recorded
    mad: float
    n: int  # nodes it was recorded on (0: not said)
    date: str  # when it was recorded (YYYY-MM-DD, "" not said)
    nodes: int  # nodes held to it in this scan
    below: list[str]  # suspects: under it by the factor and the gap in the first round
    named: list[str]  # confirmed alone: named against the baseline
    most_below: bool  # more than half the nodes held to it were under it: it named none (PRB004)


class ProbesDoc(TypedDict):
    """What `--probes` measured: a row per node, the statistics, the rounds that convicted."""

    nodes: list[ProbeNodeDoc]
    stats: list[ProbeStatDoc]
    baseline: list[ProbeBaselineDoc]  # with a profile's baselines: the figures the nodes were held to
    no_baseline: list[str]  # hardware types measured for which the profile has no baseline (when it has any)
    rounds: int  # probe rounds run: each probe on every node, then suspects and controls alone
    failed: list[str]  # nodes where a probe did not run (PRB003)
    line: str  # "probes: 8 nodes, 7 rounds; ...; slow: h3" or "...; none slower than 1.5x the median"


class SlurmExcludeDoc(TypedDict):
    exclude: str  # "--exclude=gpu[003,007]" ("" when nothing is taken out)
    nodelist: str  # the rest, folded
    nodes: int  # ... how many
    srun: str  # "srun --nodes=N --nodelist=REST COMMAND": the relaunch on the rest
    sbatch: str  # "sbatch --exclude=NAMED JOB_SCRIPT"
    drain: str  # the admins' scontrol command


class KubernetesExcludeDoc(TypedDict):
    cordon: list[str]  # kubectl cordon NODE, one a node
    taint: list[str]  # kubectl taint nodes NODE validator.io/excluded=true:NoSchedule
    affinity: str  # a pod spec's nodeAffinity (NotIn the named nodes), YAML


class ExcludeDoc(TypedDict):
    """The nodes to take out (the drain list and the slow nodes), in each launcher's form."""

    hosts: list[str]
    keep: list[str]  # the allocation's (or the scan's) other nodes
    slurm: SlurmExcludeDoc
    hostfile: list[str]  # deepspeed / mpirun hostfile of the rest: "HOST slots=N"
    kubernetes: KubernetesExcludeDoc


class ScanDoc(TypedDict):
    """What `validator scan` did: transport, targets reached, the net check's counts."""

    transport: str  # ssh | slurm | kubectl | local | openssh
    targets: int
    reached: int
    interrupted: bool
    elapsed_s: float
    net_check: NetCheckDoc | None
    probes: ProbesDoc | None  # `--probes`: the node probes' figures and verdicts
    exclude: ExcludeDoc  # the nodes to take out, in each launcher's form
    warnings: list[str]
    failed: str | None  # the scan failed on the scanner's side (exit 2, nothing drained)


class PreflightDoc(TypedDict):
    """What `preflight --net-check` and `--probes` measured over the arrivals (one node a host), and
    the slow nodes to take out (NET105, PRB001, PRB002) in each launcher's form."""

    net_check: NetCheckDoc | None  # null: --net-check not asked, or not every rank arrived
    probes: ProbesDoc | None  # null: --probes not asked, or not run
    exclude: ExcludeDoc  # the slow nodes out of the arrivals' hosts (hostfile slots: each host's ranks)


class EvidenceDoc(TypedDict):
    source: str  # file:line, or a dump/trace file
    text: str
    rank: int | None


class OtherCauseDoc(TypedDict):
    code: str
    summary: str
    ranks: list[int]


# functional form: "class" (the failure class in the corpus vocabulary) is a Python keyword
DiagnosisDoc = TypedDict(
    "DiagnosisDoc",
    {
        "failure_class": str,
        "class": str,  # codes.VOCAB: collective_timeout, oom, ... unrecognised, none
        "code": "str | None",
        "initiating_ranks": "list[int]",
        "initiating_hosts": "list[str]",
        "confidence": str,  # high | medium | low | unknown
        "reason": str,
        "summary": str,
        "stack": "list[str]",
        "collateral_ranks": "list[int]",
        "ranks_seen": "list[int]",
        "evidence": "list[EvidenceDoc]",
        "other_causes": "list[OtherCauseDoc]",
        "notes": "list[str]",
    },
)
DiagnosisDoc.__doc__ = """The verdict of `validator diagnose` (docs/diagnose.md)."""


class ReportDoc(TypedDict):
    """The report of `check`, `preflight` and `node-check`; the base of the others."""

    schema: int
    validator: str
    title: str
    participants: int
    hosts: str
    host_count: int
    summary: SummaryDoc
    findings: list[FindingDoc]
    outcomes: list[OutcomeDoc]
    input_errors: list[str]


class GroupsDoc(TypedDict):
    """The groups of one kind (tp, cp, dp, pp, ep, ep_etp; HSDP: dp_shard, dp_replicate), each "ranks on hosts", folded."""

    size: int  # ranks in each group
    count: int  # groups of this kind
    spanning: int  # groups whose ranks are on more than one host
    shown: list[str]  # "ranks 0-7 on node[001-002]": spanning groups first, at most LAYOUT_SHOWN


class PlacementNodeDoc(TypedDict):
    """One node of the placement: its host, its node rank and its ranks."""

    host: str
    node_rank: int | None  # None: a participant per rank, placed by its own rank
    ranks: str  # folded: "2-3"


class PlacementDoc(TypedDict):
    """Where the group map's hosts come from (docs/layout.md, "The group map")."""

    source: str  # given (the launch names every rank's node) | predicted (c10d's rank assignment) | unknown
    rule: str  # predicted: torch's rule and where it is; given: the launch setting read; unknown: why
    nodes: list[PlacementNodeDoc]  # in node-rank order, at most PLACEMENT_SHOWN


class _LayoutExtras(TypedDict, total=False):
    placement: PlacementDoc  # where each rank runs and how that is known (when the degrees tile the world)


class LayoutDoc(_LayoutExtras):
    """The parallel layout the job's configuration names, its degrees for this world, and the
    group map in the framework's rank order (docs/layout.md)."""

    framework: str  # megatron | nemo | torchtitan | deepspeed | explicit
    source: str  # where it was read: argv, --deepspeed_config PATH, --job.config_file PATH, --layout
    world: int
    order: str  # rank order, innermost first
    degrees: dict[str, int]  # tp cp pp dp ep etp edp, with the framework's defaults and inferences
    groups: dict[str, GroupsDoc]  # empty when the degrees do not tile the world or hosts are unknown


class _ReportExtras(TypedDict, total=False):
    scan: ScanDoc  # `validator scan`
    preflight: PreflightDoc  # `preflight --net-check` or `--probes`
    drain: list[str]  # `validator scan`: the hosts to drain
    diagnosis: DiagnosisDoc  # `validator diagnose`
    layout: LayoutDoc  # `check`, `preflight`, `scan`: when the job's configuration names a layout


class AnyReportDoc(ReportDoc, _ReportExtras):
    """A report of any command: the common fields, and the command's own ones."""
