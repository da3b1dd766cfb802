"""The parallel layout a job asks for, from its own configuration, and the groups it makes.

Pure: the command line (as the agent sent it, secrets redacted), the layout keys of the
configuration files it names (read on the node by the agent, ``probe.job_configs``) and the
environment in, ``LayoutFacts`` out. Where each value comes from, and the frameworks' own rules
the checks apply to it, are in docs/layout.md.
"""

from __future__ import annotations

from validator.facts.command import parse_command
from validator.facts.node import major_minor

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import LayoutFacts

# Megatron-LM's arguments (megatron/training/arguments.py) -> (section, key)
MEGATRON = {
    "--tensor-model-parallel-size": ("degrees", "tp"),
    "--pipeline-model-parallel-size": ("degrees", "pp"),
    "--context-parallel-size": ("degrees", "cp"),
    "--expert-model-parallel-size": ("degrees", "ep"),
    "--expert-tensor-parallel-size": ("degrees", "etp"),
    "--virtual-pipeline-model-parallel-size": ("degrees", "vpp"),
    "--num-virtual-stages-per-pipeline-rank": ("degrees", "vpp"),
    "--num-layers-per-virtual-pipeline-stage": ("sizes", "layers_per_vstage"),
    "--num-layers": ("sizes", "layers"),
    "--global-batch-size": ("sizes", "global_batch"),
    "--micro-batch-size": ("sizes", "micro_batch"),
}
# options with which Megatron splits layers unevenly: its divisibility assertion does not apply
MEGATRON_UNEVEN = (
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split", "--hybrid-layer-pattern",
)  # fmt: skip
# NeMo (Hydra overrides of the same Megatron settings): model.<name>=<value>
NEMO = {
    "model.tensor_model_parallel_size": ("degrees", "tp"),
    "model.pipeline_model_parallel_size": ("degrees", "pp"),
    "model.context_parallel_size": ("degrees", "cp"),
    "model.expert_model_parallel_size": ("degrees", "ep"),
    "model.expert_tensor_parallel_size": ("degrees", "etp"),
    "model.virtual_pipeline_model_parallel_size": ("degrees", "vpp"),
    "model.num_layers": ("sizes", "layers"),
    "model.global_batch_size": ("sizes", "global_batch"),
    "model.micro_batch_size": ("sizes", "micro_batch"),
}
# torchtitan's [parallelism] / [training] keys (TOML, or --section.key on the command line)
TORCHTITAN = {
    "parallelism.data_parallel_replicate_degree": ("degrees", "dp_replicate"),
    "parallelism.data_parallel_shard_degree": ("degrees", "dp_shard"),
    "parallelism.tensor_parallel_degree": ("degrees", "tp"),
    "parallelism.pipeline_parallel_degree": ("degrees", "pp"),
    "parallelism.context_parallel_degree": ("degrees", "cp"),
    "parallelism.expert_parallel_degree": ("degrees", "ep"),
    "parallelism.expert_tensor_parallel_degree": ("degrees", "etp"),
    "training.local_batch_size": ("sizes", "micro_batch"),
    "training.global_batch_size": ("sizes", "global_batch"),
    "parallelism.pipeline_parallel_microbatch_size": ("sizes", "pp_micro_batch"),
}
# accelerate's config keys, which are also `accelerate launch` options (commands/launch.py; the
# command line wins: _validate_launch_command copies a config value only to an option not given)
ACCELERATE = {
    "num_processes": ("sizes", "processes"), "num_machines": ("sizes", "machines"),
    "fsdp_version": ("sizes", "fsdp_version"),
    "megatron_lm_tp_degree": ("degrees", "tp"), "megatron_lm_pp_degree": ("degrees", "pp"),
    "megatron_lm_context_parallel_size": ("degrees", "cp"), "megatron_lm_expert_model_parallel_size": ("degrees", "ep"),
    "megatron_lm_expert_tensor_parallel_size": ("degrees", "etp"),
    "parallelism_config_dp_replicate_size": ("degrees", "dp_replicate"),
    "parallelism_config_dp_shard_size": ("degrees", "dp_shard"),
    "parallelism_config_tp_size": ("degrees", "tp"), "parallelism_config_cp_size": ("degrees", "cp"),
    "parallelism_config_sp_size": ("degrees", "sp"),
}  # fmt: skip
# FSDP1's sharding strategy (accelerate utils/constants.py FSDP_SHARDING_STRATEGY, index + 1 is
# torch's ShardingStrategy value; utils/dataclasses.py FullyShardedDataParallelPlugin.__post_init__
# takes the name, any case, or the number): the two hybrid ones shard within a node's devices and
# replicate across nodes (torch/distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups).
FSDP_HYBRID = {"HYBRID_SHARD": 4, "4": 4, "HYBRID_SHARD_ZERO2": 5, "_HYBRID_SHARD_ZERO2": 5, "5": 5}
# the Megatron-LM plugin's degrees that neither the line nor the config names (utils/dataclasses.py
# MegatronLMPlugin.__post_init__): its environment variable (accelerate's launch writes the named ones
# there, utils/launch.py prepare_multi_gpu_env; one the node exported itself is read the same way), else
# its default. context_parallel_size defaults to 2 since accelerate 1.13 (7e384699) and to 1 before;
# where the node's accelerate version is not known an unnamed CP counts as 1: a gate that blocked an
# older accelerate's valid job would be wrong.
ACCELERATE_MEGATRON = {"tp": ("TP_DEGREE", 1), "pp": ("PP_DEGREE", 1), "cp": ("CONTEXT_PARALLEL_SIZE", 1),
                       "ep": ("EXPERT_MODEL_PARALLEL_SIZE", 1), "etp": ("EXPERT_TENSOR_PARALLEL_SIZE", 1)}  # fmt: skip
MEGATRON_LM_ENV = "MEGATRON_LM_"
CP_TWO_SINCE = (1, 13)  # accelerate's version from which the plugin's unset CP is 2
ACCELERATE_MODES = ("use_megatron_lm", "use_fsdp", "multi_gpu", "use_deepspeed", "cpu", "tpu")
# DeepSpeed's config JSON (deepspeed/runtime/config.py)
DEEPSPEED = {
    "train_batch_size": ("sizes", "train_batch"),
    "train_micro_batch_size_per_gpu": ("sizes", "micro_batch"),
    "gradient_accumulation_steps": ("sizes", "grad_acc"),
    "zero_optimization.stage": ("sizes", "zero_stage"),
    "tensor_parallel.autotp_size": ("degrees", "tp"),
    "tensor_parallel.tp_size": ("degrees", "tp"),
}
# --layout / VALIDATOR_LAYOUT words
EXPLICIT = {
    "tp": ("degrees", "tp"), "pp": ("degrees", "pp"), "cp": ("degrees", "cp"), "ep": ("degrees", "ep"),
    "etp": ("degrees", "etp"), "dp": ("degrees", "dp"), "vpp": ("degrees", "vpp"), "layers": ("sizes", "layers"),
    "gbs": ("sizes", "global_batch"), "mbs": ("sizes", "micro_batch"), "grad_acc": ("sizes", "grad_acc"),
    "dp_shard": ("degrees", "dp_shard"), "dp_replicate": ("degrees", "dp_replicate"),  # HSDP: dp = replicate x shard
}  # fmt: skip
MEGATRON_ORDER = "tp-cp-ep-dp-pp"  # megatron/core/parallel_state.py initialize_model_parallel(order=...)
TORCHTITAN_ORDER = "tp-cp-dp-pp"  # ParallelDims.build_mesh: ["pp", "dp_replicate", "dp_shard", "cp", "tp"]
LAYOUT_ENV = "VALIDATOR_LAYOUT"
MAX_DEGREE = 1 << 20


def _number(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if abs(raw) <= MAX_DEGREE * 1024 else None
    text = str(raw).strip()
    if text.lstrip("-").isdecimal() and len(text) <= 12:
        return int(text)
    return None


class _Builder:
    def __init__(self, framework: str, source: str, order: str) -> None:
        self.layout: LayoutFacts = {"framework": framework, "source": source, "degrees": {}, "sizes": {},
                                    "order": order, "errors": []}  # fmt: skip

    def put(self, where: tuple[str, str], raw: Any, name: str) -> None:
        if isinstance(raw, str) and raw.strip().lower() == "auto":
            return  # DeepSpeed's "auto" (HF Trainer fills it in): not known before the job starts
        value = _number(raw)
        if value is None:
            self.layout["errors"].append(f"{name} {str(raw)[:40]!r} is not a whole number")
            return
        section, key = where
        self.layout[section][key] = value  # type: ignore[literal-required]


def _options(argv: list[str], table: dict[str, tuple[str, str]], prefix: str = "--") -> dict[str, str]:
    """``--name value`` and ``--name=value`` (NeMo: ``name=value``, ``+name=value``) of ``table``'s names."""
    out: dict[str, str] = {}
    for i, word in enumerate(argv):
        name, eq, inline = word.lstrip("+").partition("=") if not prefix else word.partition("=")
        if name not in table:
            continue
        if eq:
            out[name] = inline
        elif prefix and i + 1 < len(argv):
            out[name] = argv[i + 1]
    return out


def parse_explicit(text: str, source: str) -> LayoutFacts:
    """``tp=2,pp=4,cp=1,ep=1,dp=2`` (and ``layers``, ``gbs``, ``mbs``, ``order=tp-cp-ep-dp-pp``)."""
    b = _Builder("explicit", source, MEGATRON_ORDER)
    for word in text.split(","):
        key, eq, value = word.strip().partition("=")
        if key == "order" and eq:
            b.layout["order"] = value.strip()[:40]
        elif key in EXPLICIT and eq:
            b.put(EXPLICIT[key], value, f"{source}: {key}")
        elif word.strip():
            b.layout["errors"].append(f"{source}: {word.strip()[:40]!r} is not one of {', '.join(EXPLICIT)}, order")
    d = b.layout["degrees"]
    if "dp" in d and ("dp_shard" in d or "dp_replicate" in d):
        b.layout["errors"].append(f"{source}: dp with dp_shard/dp_replicate: give dp, or the two HSDP axes")
    return b.layout


def parse_layout(
    argv: list[str], configs: Any, env: dict[str, str], accelerate: str | None = None
) -> LayoutFacts | None:
    """The layout the job asks for; None when nothing names one. First found wins: an explicit
    ``--layout`` (``VALIDATOR_LAYOUT``), Megatron-LM or NeMo arguments, torchtitan's TOML and its
    command-line overrides, an accelerate config, a DeepSpeed config. ``accelerate``: the node's
    installed accelerate version (its defaults changed), None when not known."""
    entries = [c for c in configs if isinstance(c, dict)] if isinstance(configs, list) else []
    errors = [f"{c.get('option')} {c.get('path')}: {c['error']}" for c in entries if c.get("error")]
    if env.get(LAYOUT_ENV):
        return parse_explicit(env[LAYOUT_ENV], LAYOUT_ENV)
    layout = (_megatron(argv) or _torchtitan(argv, entries) or _accelerate(argv, entries, env, accelerate)
              or _deepspeed(entries))  # fmt: skip
    if layout is None and errors:  # a named configuration that could not be read: say so
        layout = _Builder("unknown", "argv", MEGATRON_ORDER).layout
    if layout is not None:
        layout["errors"] = errors + layout["errors"]
    return layout


def _megatron(argv: list[str]) -> LayoutFacts | None:
    for framework, table, prefix in (("megatron", MEGATRON, "--"), ("nemo", NEMO, "")):
        found = _options(argv, table, prefix)
        if found:
            b = _Builder(framework, "argv", MEGATRON_ORDER)
            for name, raw in found.items():
                b.put(table[name], raw, name)
            if any(w.partition("=")[0] in MEGATRON_UNEVEN for w in argv):
                b.layout["sizes"]["uneven"] = 1
            return b.layout
    return None


def _torchtitan(argv: list[str], entries: list[dict[str, Any]]) -> LayoutFacts | None:
    files = [c for c in entries if c.get("kind") == "torchtitan"]
    overrides = _options(argv, {f"--{k}": v for k, v in TORCHTITAN.items()})
    if not files and not overrides:
        return None
    source = f"{files[0].get('option')} {files[0].get('path')}" if files else "argv"
    b = _Builder("torchtitan", source, TORCHTITAN_ORDER)
    for c in files[:1]:
        for key, raw in dict(c.get("values") or {}).items():
            if key in TORCHTITAN:
                b.put(TORCHTITAN[key], raw, key)
    for name, raw in overrides.items():  # the command line overrides the file (torchtitan's ConfigManager)
        b.put(TORCHTITAN[name[2:]], raw, name)
    return b.layout


def _yaml_scalar(raw: Any) -> Any:
    """A value of accelerate's YAML as the agent sent it (the text after ``key:``), read as YAML."""
    if not isinstance(raw, str) or len(raw) > 64:
        return raw
    import yaml  # here, not at the top: every rank parses its facts on the launch path (32 ms of import)

    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def accelerate_config(entries: list[dict[str, Any]], opts: dict[str, str]) -> tuple[dict[str, Any], str]:
    """The values of the accelerate config file that applies (--config_file, else the default one
    the agent found), each read as YAML, and where it is (``--config_file PATH``; "" none). Its
    command-line options win over it (accelerate's launch_command: a config value fills only an
    option left unset)."""
    default = "config_file" not in opts
    files = [c for c in entries if c.get("kind") == "accelerate" and (c.get("option") == "default") == default]
    if not files:
        return {}, ""
    values = {k: _yaml_scalar(v) for k, v in dict(files[0].get("values") or {}).items()}
    return values, f"{files[0].get('option')} {files[0].get('path')}"


def _accelerate(argv: list[str], entries: list[dict[str, Any]], env: dict[str, str], version: str | None
                ) -> LayoutFacts | None:  # fmt: skip
    """`accelerate launch`: its config file (--config_file, else the default one the agent found)
    under its command-line options. The Megatron-LM plugin (distributed_type MEGATRON_LM or
    --use_megatron_lm) hands its degrees to Megatron; a parallelism config (FSDP2) builds a device
    mesh; anything else names no layout."""
    command = parse_command(argv)
    if command["tool"] != "accelerate":
        return None
    opts = command["options"]
    values, source = accelerate_config(entries, opts)
    values.update({k: v for k, v in opts.items() if k in ACCELERATE or k == "fsdp_sharding_strategy"})
    mode = next((m for m in ACCELERATE_MODES if m in opts), None)
    kind = str(values.get("distributed_type") or "") if mode is None else mode
    megatron = kind in ("MEGATRON_LM", "use_megatron_lm")
    fsdp1 = kind in ("FSDP", "use_fsdp") and str(values.get("fsdp_version", 1)) == "1"
    hybrid = FSDP_HYBRID.get(str(values.get("fsdp_sharding_strategy", "")).upper()) if fsdp1 else None
    if not megatron and not hybrid and not any(k.startswith("parallelism_config_") for k in values):
        return None
    source = source or "argv"
    b = _Builder("accelerate", source, MEGATRON_ORDER if megatron else TORCHTITAN_ORDER)
    if hybrid:
        b.layout["sizes"]["fsdp_hybrid"] = hybrid  # torch's ShardingStrategy: 4 HYBRID_SHARD, 5 _ZERO2
    for key, raw in values.items():
        if key in ACCELERATE and (megatron or not key.startswith("megatron_lm_")):
            b.put(ACCELERATE[key], raw, key)
    if megatron:
        b.layout["degrees"] = {
            k: v for k, v in b.layout["degrees"].items() if k not in ("dp_replicate", "dp_shard", "sp")
        }
        for key, (name, default) in ACCELERATE_MEGATRON.items():
            if key in b.layout["degrees"]:
                continue
            if (raw := env.get(MEGATRON_LM_ENV + name)) is not None:
                b.put(("degrees", key), raw, MEGATRON_LM_ENV + name)
            elif key == "cp" and (since := major_minor(version)) is not None and since >= CP_TWO_SINCE:
                b.layout["degrees"]["cp"] = 2
                b.layout["source"] += f"; cp=2 is accelerate {version}'s default"
            else:
                b.layout["degrees"][key] = default
    else:
        b.layout["degrees"].setdefault("dp_replicate", 1)
        b.layout["degrees"].setdefault("dp_shard", 1)
    return b.layout


def _deepspeed(entries: list[dict[str, Any]]) -> LayoutFacts | None:
    files = [c for c in entries if c.get("kind") == "deepspeed" and not c.get("error")]
    if not files:
        return None
    c = files[0]
    b = _Builder("deepspeed", f"{c.get('option')} {c.get('path')}", MEGATRON_ORDER)
    for key, raw in dict(c.get("values") or {}).items():
        if key in DEEPSPEED:
            b.put(DEEPSPEED[key], raw, key)
    return b.layout


# --------------------------------------------------------------------------- resolved degrees, groups


def resolve(layout: LayoutFacts, world: int) -> dict[str, int]:
    """Every degree, with the framework's defaults and inferences for ``world`` ranks: tp cp pp
    dp ep etp edp (the expert data-parallel size). A degree that does not divide gives 0."""
    d, fw = layout["degrees"], layout["framework"]
    tp, pp, cp, ep, sp = d.get("tp", 1), d.get("pp", 1), d.get("cp", 1), d.get("ep", 1), d.get("sp", 1)
    if fw == "torchtitan" or "dp_shard" in d or "dp_replicate" in d:  # ParallelDims._validate: dp_shard -1 is
        # world // (dp_replicate*cp*tp*pp)
        rep, shard = d.get("dp_replicate", 1), d.get("dp_shard", -1)
        inner = rep * cp * tp * pp
        if shard < 0 and inner > 0:
            shard = world // inner
        if fw == "accelerate" and rep * shard * cp * tp * sp == 1:  # ParallelismConfig._validate_accelerator: DDP
            rep = world
        dp, etp = rep * shard, d.get("etp", 1)
        if sp > 1:  # DeepSpeed's sequence parallel (parallel_state_sp.py): data parallel is world // sp
            model = sp * tp * cp
            dp = world // model if model > 0 and world % model == 0 else 0
    else:
        model = tp * pp * cp
        dp = d.get("dp", world // model if model > 0 and world % model == 0 else 0)
        etp = d.get("etp", tp)
    expert = etp * ep * pp
    edp = world // expert if expert > 0 and world % expert == 0 else 0
    out = {"tp": tp, "cp": cp, "pp": pp, "dp": dp, "ep": ep, "etp": etp, "edp": edp}
    return {**out, "sp": sp} if "sp" in d else out


def rank_groups(axes: list[tuple[str, int]], group: set[str]) -> list[list[int]]:
    """The ranks of every group over the axes named in ``group``, the axes innermost first (rank =
    sum of index x stride): Megatron's ``generate_masked_orthogonal_rank_groups`` (parallel_state.py),
    which torchtitan's device mesh, its axes outermost first, also lays out."""
    strides, s = [], 1
    for _, n in axes:
        strides.append(s)
        s *= n

    def offsets(picked: list[tuple[int, int]]) -> list[int]:  # the first axis varies fastest
        out = [0]
        for n, st in picked:
            out = [o + i * st for i in range(n) for o in out]
        return out

    inner = [(n, st) for (name, n), st in zip(axes, strides, strict=True) if name in group]
    outer = [(n, st) for (name, n), st in zip(axes, strides, strict=True) if name not in group]
    return [[b + o for o in offsets(inner)] for b in offsets(outer)]


def _hsdp(layout: LayoutFacts, r: dict[str, int], devices: int | None) -> tuple[int, int] | None:
    """(replicate, shard) of HSDP (torchtitan's and accelerate's mesh ["pp", "dp_replicate", "dp_shard", "cp", "tp"]:
    FSDP shards within a dp_shard group and replicates across dp_replicate), both above 1; else None. FSDP1's
    HYBRID_SHARD (accelerate passes no process group) shards within dist.new_subgroups(torch.cuda.device_count()),
    consecutive ranks, and replicates across them (torch/distributed/fsdp/_init_utils.py
    _init_intra_and_inter_node_groups): the same two axes, the shard's size the nodes' ``devices``."""
    if layout["sizes"].get("fsdp_hybrid"):
        if devices is None or not 1 < devices <= r["dp"] or r["dp"] % devices:
            return None  # torch raises there (LAY002), or a device a rank: nothing to shard within
        return r["dp"] // devices, devices  # (1, dp): one shard group of every rank, nothing to replicate across
    d = layout["degrees"]
    rep, shard = d.get("dp_replicate", 1), d.get("dp_shard", -1)
    if r.get("sp", 1) > 1 or ("dp_shard" not in d and "dp_replicate" not in d) or rep < 2:
        return None
    shard = r["dp"] // rep if shard < 0 else shard
    return (rep, shard) if shard > 1 and rep * shard == r["dp"] else None


def group_map(layout: LayoutFacts, world: int, devices: int | None = None) -> dict[str, list[list[int]]] | None:
    """Ranks of every TP / CP / DP / PP / EP / EP x expert-TP group of a degree above 1 (and HSDP's
    dp_shard and dp_replicate groups; FSDP1 HYBRID_SHARD's where the nodes' GPU count, ``devices``, is
    known), in the framework's rank order; None when the degrees do not tile ``world``."""
    r = resolve(layout, world)
    sp = r.get("sp", 1)
    if r["tp"] * sp * r["cp"] * r["dp"] * r["pp"] != world or min(r.values()) < 1:
        return None
    order = [a for a in layout["order"].split("-") if a in ("tp", "cp", "dp", "pp")]
    if sorted(order) != ["cp", "dp", "pp", "tp"]:
        order = ["tp", "cp", "dp", "pp"]
    if sp > 1:  # accelerate's mesh ["dp_replicate", "dp_shard", "cp", "sp", "tp"]; DeepSpeed's SP groups: sp
        order.insert(order.index("tp") + 1, "sp")  # consecutive ranks (parallel_state_sp.py)
    dense = [(a, r.get(a, 1)) for a in order]
    out = {a: rank_groups(dense, {a}) for a in ("tp", "sp", "cp", "dp", "pp") if r.get(a, 1) > 1}  # 1: alone
    if hsdp := _hsdp(layout, r, devices):  # its dp is two mesh axes, dp_shard inside dp_replicate: each is a group too
        i = order.index("dp")
        dense[i : i + 1] = [("dp_shard", hsdp[1]), ("dp_replicate", hsdp[0])]
        out["dp"] = rank_groups(dense, {"dp_shard", "dp_replicate"})
        out["dp_shard"] = rank_groups(dense, {"dp_shard"})
        if hsdp[0] > 1:
            out["dp_replicate"] = rank_groups(dense, {"dp_replicate"})
    if r["ep"] > 1 and r["etp"] * r["ep"] * r["edp"] * r["pp"] == world:  # Megatron's expert RankGenerator
        expert = [("tp", r["etp"]), ("ep", r["ep"]), ("dp", r["edp"]), ("pp", r["pp"])]
        out["ep"] = rank_groups(expert, {"ep"})
        out["ep_etp"] = rank_groups(expert, {"tp", "ep"})
    return out
