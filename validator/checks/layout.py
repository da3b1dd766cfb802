"""LAY: the parallel layout (TP x PP x CP x EP x DP) the job's own configuration asks for, held
to the world size and to each framework's own rules before the job starts (docs/layout.md)."""

from __future__ import annotations

from typing import Any

from validator.checks.base import Check, Hit, Job, check, describe
from validator.codes import table
from validator.documents import GroupsDoc, LayoutDoc, PlacementDoc, PlacementNodeDoc
from validator.facts.gpu import visible_count
from validator.facts.layout import group_map, resolve
from validator.model import LayoutFacts, Severity
from validator.targets import fold_hosts, fold_ranks

MEGATRON_LIKE = ("megatron", "nemo", "explicit")
LAYOUT_SHOWN = 8  # groups of each kind the report names (spanning ones first)
MAX_MAPPED = 1 << 17  # ranks: beyond this the report gives the degrees without the group map
PLACEMENT_SHOWN = 64  # nodes the report's layout.placement lists
PREDICTED = "predicted: "  # a node rank's launch source when preflight predicted it (placement.SOURCE)
UNPLACED = ("not every rank's node is known before the start: c10d and etcd-v2 number the nodes at their "
            "rendezvous (preflight predicts it only as the torchrun wrapper; docs/preflight.md)")  # fmt: skip


def _key(layout: LayoutFacts | None) -> Any:
    """What must be equal on every rank (the source, a file's path, may differ), hashable and cheap
    at 100,000 ranks."""
    if layout is None:
        return None
    return (layout["framework"], tuple(layout["degrees"].items()), tuple(layout["sizes"].items()), layout["order"])


def _layout(job: Job) -> tuple[LayoutFacts | None, dict[Any, list[int]]]:
    """The majority layout and every distinct one's participants (computed once)."""

    def compute() -> tuple[LayoutFacts | None, dict[Any, list[int]]]:
        layouts = job.column("layout")
        if all(lay is None for lay in layouts):
            return None, {}
        keys = [_key(lay) or "none" for lay in layouts]  # None: a rank whose configuration names no layout
        expected, groups = job.majority(range(len(job)), keys.__getitem__)
        return layouts[groups[expected][0]] if expected is not None else None, groups

    return job.memo("layout.majority", compute)


def _show(layout: LayoutFacts) -> str:
    d, s = layout["degrees"], layout["sizes"]
    parts = [f"{k}={v}" for k, v in d.items()] + [f"{k}={v}" for k, v in s.items()]
    return f"{layout['framework']} ({layout['source']}): {', '.join(parts) or 'defaults'}"


def _world(job: Job, layout: LayoutFacts | None = None) -> int | None:
    """The job's world size; for accelerate, else its num_processes (config file or option), which
    the launch contract does not read from the file."""
    w = job.world_size
    if not (isinstance(w, int) and w > 0) and layout is not None and layout["framework"] == "accelerate":
        w = layout["sizes"].get("processes")
    return w if isinstance(w, int) and w > 0 else None


@check("LAY001", Severity.ERROR, "Parallel layout differs between ranks")
def layout_differs(job: Job) -> Any:
    """Every rank's configuration names the same parallel layout: the same framework, degrees
    (TP, PP, CP, EP, expert-TP, DP, virtual stages), layers and batch sizes, read from its own
    command line and the configuration files it names.

    Every framework computes its process groups on every rank from its own copy of the
    configuration; two ranks with different degrees build different groups, call collectives
    on groups the others never created, and hang (or crash in an assertion) at the first one.

    Launch every node with the same arguments and the same configuration file (a shared file
    system, or the same file copied to every node): the finding names the ranks of each variant.
    """
    expected, groups = _layout(job)
    if len(groups) <= 1:
        return
    layouts = job.column("layout")
    others = {k: m for k, m in groups.items() if k != (_key(expected) or "none")}
    members = [i for m in others.values() for i in m]
    actual = "; ".join(_show(layouts[m[0]]) if k != "none" else "no layout" for k, m in others.items())
    yield Hit(
        f"{len(groups)} different parallel layouts: {describe(job, groups)}",
        members,
        expected=_show(expected) if expected else "no layout",
        actual=actual[:500],
        fix="launch every rank with the same parallel arguments and configuration file",
    )


def _degree_errors(layout: LayoutFacts) -> list[str]:
    d = layout["degrees"]
    titan = layout["framework"] == "torchtitan"
    out = [f"{k}={v} is not >= 1" for k, v in d.items() if v < 1 and not (titan and k == "dp_shard" and v == -1)]
    if layout["framework"] == "torchtitan" and d.get("dp_shard", -1) == 0:
        out.append("data_parallel_shard_degree=0: torchtitan takes -1 (inferred) or >= 1")
    return out


@check("LAY005", Severity.ERROR, "A parallel degree is not a positive whole number")
def bad_degree(job: Job) -> Any:
    """Every degree the configuration names is a whole number of at least 1 (torchtitan's
    ``data_parallel_shard_degree`` may also be -1: inferred), and every value could be read.

    torchtitan asserts ``d >= 1`` for every degree but dp_shard, and ``dp_shard == -1 or
    dp_shard >= 1`` (torchtitan/distributed/parallel_dims.py, ParallelDims._validate); Megatron's
    argparse refuses a value that is not an integer and its group arithmetic divides by zero.

    Correct the named option in the command line or the configuration file.
    """
    expected, groups = _layout(job)
    if expected is None:
        return
    problems = _degree_errors(expected) + [e for e in expected["errors"] if "not a whole number" in e]
    if problems:
        yield Hit(f"{_show(expected)}: {'; '.join(problems)}", groups[_key(expected)][:1],
                  expected="whole numbers >= 1", actual="; ".join(problems))  # fmt: skip


@check("LAY006", Severity.WARNING, "The job's layout configuration could not be read")
def unreadable(job: Job) -> Any:
    """Every configuration file the command line names for the layout (``--deepspeed_config``,
    ``--ds_config``, ``--deepspeed``, torchtitan's ``--job.config_file``) was read on the node:
    it exists, is at most 256 KiB, and parses (TOML needs Python 3.11's tomllib on the node).

    A file the validator cannot read on a node is one the job may not read either (a path
    missing on that node, a file still being written); and the layout checks cannot run on it.

    Make the file readable at that path on every node, or name the layout with ``--layout``.
    """
    layouts = job.column("layout")
    seen: dict[str, list[int]] = {}
    for i, layout in enumerate(layouts):
        for err in layout["errors"] if layout else ():
            if "not a whole number" not in err:
                seen.setdefault(err, []).append(i)
    for err, members in seen.items():
        yield Hit(f"{err} (on {job.who(members)})", members, actual=err)


def _accelerate_config(d: dict[str, int], r: dict[str, int], world: int) -> list[str]:
    """accelerate/parallelism_config.py: ParallelismConfig.__post_init__ refuses CP with SP and
    TP or CP over pure replication; _validate_accelerator holds total_size (dp_replicate x dp_shard
    x tp x cp x sp) to num_processes unless it is 1 (DDP), or SP's backend is DeepSpeed (its only
    one), whose initialize_sequence_parallel (deepspeed/runtime/sequence_parallel/parallel_state_sp.py,
    called by ulysses_sp.py UlyssesSPAttentionHF.register_with_transformers) needs world % sp == 0."""
    rep, shard, sp = d.get("dp_replicate", 1), d["dp_shard"], r.get("sp", 1)
    out = []
    if r["cp"] > 1 and sp > 1:
        out.append(f"ParallelismConfig cp_size({r['cp']}) and sp_size({sp}) are mutually exclusive")
    if (r["tp"] > 1 or r["cp"] > 1) and rep > 1 and shard == 1:
        out.append(f"ParallelismConfig tp_size({r['tp']})/cp_size({r['cp']}) > 1 with dp_replicate_size({rep}) > 1 "
                   "and dp_shard_size 1: accelerate refuses TP/CP over pure data parallelism")  # fmt: skip
    if sp > 1:
        if world < sp or world % sp:
            out.append(f"DeepSpeed sequence parallel: world {world} % sp_size {sp} = {world % sp}"
                       + (f" (world < sp_size {sp})" if world < sp else ""))  # fmt: skip
        return out
    total = rep * shard * r["cp"] * r["tp"]
    if total not in (1, world):
        out.append(f"ParallelismConfig total_size dp_replicate({rep}) x dp_shard({shard}) x cp({r['cp']}) x "
                   f"tp({r['tp']}) = {total} != num_processes {world}")  # fmt: skip
    return out


def _devices(job: Job) -> int | None:
    """The devices torch.cuda.device_count() sees on the nodes (the visible ones), when every node
    that reported GPUs sees the same number; None: no GPUs reported, or nodes that differ."""
    counts = set()
    for i in job.node_reps:
        if n := visible_count(job.facts[i]["gpus"]):
            counts.add(n)
    return counts.pop() if len(counts) == 1 else None


def _hybrid_shard(world: int, gpus: int) -> list[str]:
    """FSDP1 HYBRID_SHARD / _HYBRID_SHARD_ZERO2 without a process group (accelerate passes none):
    torch/distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups shards over
    dist.new_subgroups(torch.cuda.device_count()), which raises unless the world divides by it."""
    if world < gpus or world % gpus:
        return [f"FSDP HYBRID_SHARD shards over groups of torch.cuda.device_count() = {gpus} ranks: world {world} "
                f"% {gpus} = {world % gpus}" + (f" (world < {gpus})" if world < gpus else "")]  # fmt: skip
    return []


@check("LAY002", Severity.ERROR, "Parallel degrees do not fit the world size")
def world_mismatch(job: Job) -> Any:
    """The product of the parallel degrees fits the world size, by the framework's own rule.
    Megatron-LM / NeMo: world % (TP x PP x CP) == 0 and world % (expert-TP x EP x PP) == 0
    (megatron/core/parallel_state.py, initialize_model_parallel: "world_size (...) is not
    divisible by ..."); torchtitan: dp_replicate x dp_shard x CP x TP x PP == world, with
    dp_shard -1 inferred as world // (dp_replicate x CP x TP x PP) and then >= 1, and EP dividing
    dp_shard x CP x TP (torchtitan/distributed/parallel_dims.py, ParallelDims._validate); DeepSpeed:
    world % autotp_size == 0; accelerate: a parallelism config's dp_replicate x dp_shard x CP x TP
    x SP == num_processes unless it is 1 (accelerate/parallelism_config.py,
    ParallelismConfig._validate_accelerator: "total_size (...) does not match num_processes"), and
    with SP > 1 (DeepSpeed's Ulysses, where accelerate skips that check) world % SP == 0
    (deepspeed/runtime/sequence_parallel/parallel_state_sp.py, initialize_sequence_parallel), CP
    and SP not both > 1 and no TP or CP over dp_replicate > 1 with dp_shard 1 (ParallelismConfig.
    __post_init__); FSDP1 HYBRID_SHARD (and _HYBRID_SHARD_ZERO2): world % devices per node == 0
    (torch/distributed/fsdp/_init_utils.py, _init_intra_node_process_group: dist.new_subgroups(
    torch.cuda.device_count()), "The world size (...) must be divisible by 'group_size'"); the
    Megatron-LM plugin's degrees by Megatron's rule (its context parallel size 2 when unset), and
    num_processes % num_machines == 0 (accelerate starts num_processes // num_machines a machine:
    utils/launch.py); an explicit --layout with dp: TP x PP x CP x DP == world.

    The framework raises this at its first line of parallel setup, after every node has been
    booked, the containers pulled and NCCL initialised: a crash minutes into the job.

    Choose degrees whose product divides the world size (nodes x processes per node), or change
    the number of nodes; the finding shows the arithmetic.
    """
    expected, groups = _layout(job)
    world = _world(job, expected)
    if expected is None or world is None or _degree_errors(expected):
        return
    r, d, fw, s = resolve(expected, world), expected["degrees"], expected["framework"], expected["sizes"]
    wrong: list[str] = []
    if fw == "torchtitan":
        rep, shard = d.get("dp_replicate", 1), d.get("dp_shard", -1)
        if r["dp"] < 1:
            wrong.append(f"dp_shard -1 infers {world} // ({rep}x{r['cp']}x{r['tp']}x{r['pp']}) = 0, not >= 1")
        elif (got := r["dp"] * r["cp"] * r["tp"] * r["pp"]) != world:
            wrong.append(f"dp_replicate({rep}) x dp_shard({r['dp'] // max(rep, 1)}) x cp({r['cp']}) x tp({r['tp']}) x "
                         f"pp({r['pp']}) = {got} != world {world}" + (" (dp_shard inferred)" if shard < 0 else ""))  # fmt: skip
        elif (sparse := (r["dp"] // max(rep, 1)) * r["cp"] * r["tp"]) % r["ep"]:
            wrong.append(f"ep({r['ep']}) does not divide dp_shard x cp x tp = {sparse}")
    elif fw == "accelerate" and "dp_shard" in d:
        wrong += _accelerate_config(d, r, world)
    elif fw == "deepspeed":
        if world % r["tp"]:
            wrong.append(f"world {world} % tensor_parallel.autotp_size {r['tp']} != 0")
    else:
        model = r["tp"] * r["pp"] * r["cp"]
        if world % model:
            wrong.append(f"world {world} % (tp {r['tp']} x pp {r['pp']} x cp {r['cp']} = {model}) = {world % model}")
        expert = r["etp"] * r["ep"] * r["pp"]
        if world % expert:
            wrong.append(
                f"world {world} % (etp {r['etp']} x ep {r['ep']} x pp {r['pp']} = {expert}) = {world % expert}"
            )
        if "dp" in d and not wrong and model * d["dp"] != world:
            wrong.append(f"tp x pp x cp x dp = {model * d['dp']} != world {world}")
    if fw == "accelerate" and s.get("fsdp_hybrid") and (gpus := _devices(job)):
        wrong += _hybrid_shard(world, gpus)
    machines, procs = s.get("machines", 1), s.get("processes")
    if fw == "accelerate" and procs and machines > 0 and procs % machines:  # utils/launch.py: nproc_per_node
        wrong.append(f"num_processes {procs} % num_machines {machines} = {procs % machines}: accelerate starts "
                     f"{procs // machines} a machine, {procs // machines * machines} in all")  # fmt: skip
    if wrong:
        yield Hit(f"{_show(expected)} on {world} ranks: {'; '.join(wrong)}", groups[_key(expected)][:1],
                  expected=f"degrees that fit {world} ranks", actual="; ".join(wrong))  # fmt: skip


@check("LAY003", Severity.ERROR, "Layers do not divide by the pipeline stages")
def layers_split(job: Job) -> Any:
    """Megatron-LM / NeMo: the number of layers divides by the pipeline-parallel size, and with
    an interleaved schedule the layers of each stage divide by the layers per virtual stage
    (megatron/training/arguments.py, validate_args: "Number of layers should be divisible by the
    pipeline-model-parallel size", "number of layers per pipeline stage must be divisible number
    of layers per virtual pipeline stage"). Not checked when the layers are split unevenly on
    purpose (--decoder-first/last-pipeline-num-layers, --pipeline-model-parallel-layout), nor for
    torchtitan, which does not assert it.

    Megatron stops in argument validation on every rank, after the job has started.

    Make --num-layers a multiple of --pipeline-model-parallel-size (and of PP x layers per virtual
    stage), or split the layers unevenly with --decoder-first-pipeline-num-layers.
    """
    expected, groups = _layout(job)
    if expected is None or expected["framework"] not in MEGATRON_LIKE or expected["sizes"].get("uneven"):
        return
    s, d = expected["sizes"], expected["degrees"]
    layers, pp, per_v = s.get("layers"), d.get("pp", 1), s.get("layers_per_vstage")
    if layers is None or pp < 1:
        return
    wrong = []
    if layers % pp:
        wrong.append(f"layers {layers} % pp {pp} = {layers % pp}")
    elif per_v and per_v > 0 and (layers // pp) % per_v:
        wrong.append(f"layers per stage {layers // pp} % layers per virtual stage {per_v} = {(layers // pp) % per_v}")
    elif d.get("vpp", 0) > 1 and layers % (pp * d["vpp"]):
        wrong.append(f"layers {layers} % (pp {pp} x virtual stages {d['vpp']}) = {layers % (pp * d['vpp'])}")
    if wrong:
        yield Hit(f"{_show(expected)}: {'; '.join(wrong)}", groups[_key(expected)][:1],
                  expected=f"layers a multiple of pp {pp} (x its virtual stages)", actual="; ".join(wrong))  # fmt: skip


def _deepspeed_batch(s: dict[str, int], dp: int) -> str | None:
    """deepspeed/runtime/config.py: _set_batch_related_parameters fills in the missing value with
    integer division, then _batch_assertion requires train == micro x grad_acc x dp."""
    train, micro, acc = s.get("train_batch"), s.get("micro_batch"), s.get("grad_acc")
    if train is not None and micro is not None and acc is None:
        acc = train // micro // dp
    elif train is not None and acc is not None and micro is None:
        micro = train // dp // acc
    elif train is None and micro is not None:
        train, acc = micro * (acc or 1) * dp, acc or 1
    elif train is not None and micro is None and acc is None:
        micro, acc = train // dp, 1
    if train is None or micro is None or acc is None:
        return None
    if min(train, micro, acc) <= 0:
        return f"train_batch_size {train}, micro batch {micro}, gradient accumulation {acc}: each must be > 0"
    if train != micro * acc * dp:
        return f"train_batch_size {train} != micro {micro} x grad_acc {acc} x dp {dp} = {micro * acc * dp}"
    return None


def _torchtitan_batch(s: dict[str, int], dp: int, pp: int) -> str | None:
    """torchtitan/train.py Trainer.__init__ ("verify batch sizes"): a global batch of -1 is
    local x dp (one gradient accumulation step), then ``global_batch_size > 0`` and
    ``global_batch_size % (local_batch_size * dp) == 0``, gradient accumulation being the quotient;
    with PP, torchtitan/distributed/pipeline_parallel.py: local_batch_size % microbatch size == 0."""
    local, gbs, pmb = s.get("micro_batch", 8), s.get("global_batch", -1), s.get("pp_micro_batch", 1)
    gbs = local * dp if gbs < 0 else gbs
    if local <= 0 or gbs <= 0:
        return f"global batch {gbs}, local_batch_size {local}: each must be > 0"
    if gbs % (local * dp):
        return f"global_batch_size {gbs} % (local_batch_size {local} x dp {dp} = {local * dp}) = {gbs % (local * dp)}"
    if pp > 1 and pmb > 0 and local % pmb:
        return f"local_batch_size {local} % pipeline_parallel_microbatch_size {pmb} = {local % pmb}"
    return None


@check("LAY004", Severity.ERROR, "Global batch does not divide by micro-batch x data parallel")
def batch_split(job: Job) -> Any:
    """The global batch is a whole number of micro-batches on every data-parallel rank.
    Megatron-LM / NeMo: global_batch % (micro_batch x DP) == 0 (megatron/core/
    num_microbatches_calculator.py, ConstantNumMicroBatchesCalculator: "global batch size (...) is
    not divisible by micro batch size (...) times data parallel size"); DeepSpeed: train_batch_size
    == micro_batch_per_gpu x gradient_accumulation_steps x DP after its own filling-in of a missing
    value by integer division (deepspeed/runtime/config.py, _set_batch_related_parameters and
    _batch_assertion), DP being world / autotp_size; torchtitan: global_batch_size (-1: local x DP)
    % (local_batch_size x DP) == 0, gradient accumulation being the quotient, DP = dp_replicate x
    dp_shard, and with PP local_batch_size % pipeline_parallel_microbatch_size == 0
    (torchtitan/train.py, Trainer.__init__ "verify batch sizes"; torchtitan/distributed/
    pipeline_parallel.py, "Batch size ... must be divisible by microbatch_size").

    Each framework stops at start-up with an assertion on every rank, after NCCL is up.

    Choose a global batch that is a multiple of micro-batch x DP (DP = world / (TP x PP x CP)),
    or let the framework derive the missing value (leave one of the three out).
    """
    expected, groups = _layout(job)
    world = _world(job, expected)
    if expected is None or world is None or _degree_errors(expected):
        return
    r, s = resolve(expected, world), expected["sizes"]
    if r["dp"] < 1 or expected["framework"] == "accelerate":
        return  # accelerate's Megatron-LM plugin derives the global batch: dp x micro x num_micro_batches
    if expected["framework"] == "torchtitan":
        wrong = _torchtitan_batch(s, r["dp"], r["pp"])
    elif expected["framework"] == "deepspeed":
        wrong = _deepspeed_batch(s, r["dp"])
    else:
        gbs, mbs = s.get("global_batch"), s.get("micro_batch")
        unit = (mbs or 0) * r["dp"]
        wrong = f"global batch {gbs} % (micro batch {mbs} x dp {r['dp']} = {unit}) = {gbs % unit}" if (
            gbs is not None and unit > 0 and gbs % unit) else None  # fmt: skip
    if wrong:
        yield Hit(f"{_show(expected)} on {world} ranks: {wrong}", groups[_key(expected)][:1],
                  expected=f"a global batch that is a whole number of micro batches x dp {r['dp']}", actual=wrong)  # fmt: skip


def rank_hosts(job: Job, world: int) -> list[str] | None:
    """The host of every rank 0..world-1: from ranks, or node rank x processes per node for one
    agent a node (torchrun's static rendezvous numbers them so); None when not every rank is placed."""
    out: list[str | None] = [None] * world
    for i, launch in enumerate(job.launches):
        r, nr, lws = launch["rank"], launch["node_rank"], launch["local_world_size"]
        if isinstance(r, int) and 0 <= r < world:
            out[r] = job.host(i)
        elif r is None and isinstance(nr, int) and isinstance(lws, int) and lws > 0:
            for k in range(max(nr * lws, 0), min((nr + 1) * lws, world)):
                out[k] = job.host(i)
    return None if None in out else [h for h in out if h is not None]


def _spanning(job: Job) -> tuple[list[tuple[str, list[int], list[str]]], int] | None:
    """Tensor-parallel (and EP x expert-TP) groups on more than one host, and processes per node."""

    def compute() -> tuple[list[tuple[str, list[int], list[str]]], int] | None:
        expected, _ = _layout(job)
        world = _world(job, expected)
        if expected is None or world is None or world > 1 << 17:
            return None
        gm, hosts = group_map(expected, world, _devices(job)), rank_hosts(job, world)
        if gm is None or hosts is None:
            return None
        per_node = min(hosts.count(h) for h in set(hosts))
        out = []
        for kind in _SPANNED + (("dp_shard",) if expected["sizes"].get("fsdp_hybrid") else ()):
            for g in gm.get(kind, []):
                on = list(dict.fromkeys(hosts[r] for r in g))
                if len(on) > 1:
                    out.append((kind, g, on))
        return out, per_node

    return job.memo("layout.spanning", compute)


_SPANNED = ("tp", "ep_etp")  # the groups meant to stay within a node (and FSDP1 HYBRID_SHARD's dp_shard)
_SPAN_NAMES = {"tp": "tensor-parallel", "ep_etp": "expert (EP x expert-TP)",
               "dp_shard": "FSDP HYBRID_SHARD shard (torch.cuda.device_count() consecutive ranks)"}  # fmt: skip


def _span_hits(job: Job, spans: list[tuple[str, list[int], list[str]]], how: str) -> Any:
    severity = Severity.ERROR if job.profile and job.profile.layout_spanning == "error" else None
    for kind in _SPAN_NAMES:
        mine = [(g, on) for k, g, on in spans if k == kind]
        if not mine:
            continue
        name = _SPAN_NAMES[kind]
        shown = "; ".join(f"ranks {fold_ranks(g)} on {fold_hosts(on)}" for g, on in mine[:3])
        hosts = list(dict.fromkeys(h for _, on in mine for h in on))
        yield Hit(f"{len(mine)} {name} group(s) {how}: {shown}", [], ranks=sorted({r for g, _ in mine for r in g}),
                  hosts=hosts, expected="every group within one node", actual=shown, severity=severity)  # fmt: skip


@check("LAY007", Severity.WARNING, "Tensor-parallel groups span nodes")
def tp_spans(job: Job) -> Any:
    """Every tensor-parallel group (and every expert group, EP x expert-TP) lies within one node:
    its degree is at most the processes per node. The groups are built in the framework's own rank
    order (Megatron's RankGenerator, "tp-cp-ep-dp-pp": TP innermost; torchtitan's device mesh,
    TP its last axis), so a degree larger than the processes per node puts every group on several.

    Tensor parallelism all-reduces activations in every layer, forward and backward: inside a
    node over NVLink, between nodes over the network, an order of magnitude slower. No framework
    forbids it, so the job runs, slowly. FSDP1's HYBRID_SHARD (accelerate's
    ``fsdp_sharding_strategy``) means to shard within a node: torch shards over
    ``dist.new_subgroups(torch.cuda.device_count())``, consecutive ranks, so a node that runs fewer
    processes than it has devices puts each shard group on several nodes, and every parameter's
    all-gather and reduce-scatter crosses the network.

    Keep TP (and EP x expert-TP) at most the GPUs per node and move the rest into PP or DP; run as
    many processes a node as its devices under HYBRID_SHARD (or narrow CUDA_VISIBLE_DEVICES). A
    launch profile with ``layout_spanning: error`` makes this an error.
    """
    found = _spanning(job)
    if found and found[0] and max(len(g) for _, g, _ in found[0]) > found[1]:
        yield from _span_hits(
            job, [s for s in found[0] if len(s[1]) > found[1]], f"larger than {found[1]} processes a node"
        )


@check("LAY008", Severity.WARNING, "Processes per node do not divide into tensor-parallel groups")
def tp_straddles(job: Job) -> Any:
    """The processes per node are a multiple of the tensor-parallel degree (and of EP x expert-TP),
    so that no group smaller than a node straddles two nodes.

    A node of 6 processes with TP 4 puts ranks 4-7 on two nodes: that group all-reduces over the
    network while the others use NVLink, and every step waits for the slowest.

    Choose a TP that divides the processes per node (1, 2, 4, 8 on an 8-GPU node), or start as
    many processes on each node as a multiple of TP.
    """
    found = _spanning(job)
    if found and found[0]:
        small = [s for s in found[0] if len(s[1]) <= found[1]]
        yield from _span_hits(job, small, f"straddling two nodes ({found[1]} processes a node)")


def summary(job: Job) -> LayoutDoc | None:
    """The report's layout section: the majority layout, its degrees for this world and the group
    map (each kind's size, count, groups on more than one host, and the first groups named)."""
    expected, _ = _layout(job)
    world = _world(job, expected)
    if expected is None or world is None:
        return None
    doc: LayoutDoc = {"framework": expected["framework"], "source": expected["source"], "world": world,
                      "order": expected["order"], "degrees": resolve(expected, world), "groups": {}}  # fmt: skip
    gm = group_map(expected, world, _devices(job)) if world <= MAX_MAPPED and not _degree_errors(expected) else None
    hosts = rank_hosts(job, world) if gm else None
    if gm is not None:
        doc["placement"] = _placement(job, world, hosts)
    if gm is None or hosts is None:
        return doc
    for kind, groups in gm.items():
        if len(groups[0]) <= 1:
            continue  # degree 1: a rank alone, nothing to place
        placed = [(g, list(dict.fromkeys(hosts[r] for r in g))) for g in groups]
        spanning = [p for p in placed if len(p[1]) > 1]
        shown = (spanning + [p for p in placed if len(p[1]) == 1])[:LAYOUT_SHOWN]
        entry: GroupsDoc = {"size": len(groups[0]), "count": len(groups), "spanning": len(spanning),
                            "shown": [f"ranks {fold_ranks(g)} on {fold_hosts(on)}" for g, on in shown]}  # fmt: skip
        doc["groups"][kind] = entry
    return doc


def _placement(job: Job, world: int, hosts: list[str] | None) -> PlacementDoc:
    """Where the map's hosts come from: the launch (given), preflight's prediction of c10d's node
    ranks (predicted, its rule named), or nowhere yet (unknown); the nodes in rank order."""
    if hosts is None:
        return {"source": "unknown", "rule": UNPLACED, "nodes": []}
    node_of: list[int | None] = [None] * world
    rules: dict[str, None] = {}
    for launch in job.launches:
        r, nr, lws, src = launch["rank"], launch["node_rank"], launch["local_world_size"], launch["sources"]
        if isinstance(r, int) and 0 <= r < world:
            node_of[r] = nr if isinstance(nr, int) else None
            rules[str(src.get("rank") or "rank")] = None
        elif isinstance(nr, int) and isinstance(lws, int) and lws > 0:
            node_of[max(nr * lws, 0) : min((nr + 1) * lws, world)] = [nr] * max(
                min((nr + 1) * lws, world) - nr * lws, 0
            )
            rules[str(src.get("node_rank") or "node_rank")] = None
    predicted = [k[len(PREDICTED) :] for k in rules if k.startswith(PREDICTED)]
    nodes: list[PlacementNodeDoc] = []
    start = 0
    for r in range(1, world + 1):
        if r == world or (hosts[r], node_of[r]) != (hosts[start], node_of[start]):
            if len(nodes) < PLACEMENT_SHOWN:
                nodes.append(
                    {"host": hosts[start], "node_rank": node_of[start], "ranks": fold_ranks(list(range(start, r)))}
                )
            start = r
    rule = predicted[0] if predicted else ", ".join(rules)[:200]
    return {"source": "predicted" if predicted else "given", "rule": rule, "nodes": nodes}


CODES: dict[str, Check] = table(
    layout_differs, world_mismatch, layers_split, batch_split, bad_degree, unreadable, tp_spans, tp_straddles
)
