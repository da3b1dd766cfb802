"""Every option of every launcher, classified once: must it agree across nodes, and what the
launcher uses where a node omits it.

One row per option of each launcher's own argument parser: torchrun (torch 2.13,
``torch.distributed.run.get_args_parser()``), ``deepspeed`` (0.19.8, ``deepspeed.launcher.runner
.parse_args``) and ``accelerate launch`` (1.15, ``accelerate.commands.launch
.launch_command_parser()``). A row is ``(class, takes a value, the parser's default)``:

- ``JOB``: must agree across nodes; a difference splits, resizes or hangs the job (RNK009 compares
  them, master address and port are RDZ001/RDZ002's, resolved);
- ``NODE``: differs per node by design (a node rank, a local path or address);
- ``FREE``: each node's own business (logging, start method, intervals).

The default is exactly the parser's (``tests/facts/test_launchopts.py`` holds every row, spelling
and default against the installed parsers, so an option a new release adds fails that test until
it has a row here). Plain data and the standard library: the check path never imports a launcher.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any, TypeAlias

JOB, NODE, FREE = "job", "node", "free"
VALUE, FLAG = True, False
Row: TypeAlias = "tuple[str, bool, Any]"  # class, takes a value, the parser's default

TORCHRUN: dict[str, Row] = {
    "nnodes": (JOB, VALUE, "1:1"),
    "nproc_per_node": (JOB, VALUE, "1"),
    "rdzv_backend": (JOB, VALUE, "static"),
    "rdzv_endpoint": (JOB, VALUE, ""),
    "rdzv_id": (JOB, VALUE, "none"),
    "rdzv_conf": (NODE, VALUE, ""),  # is_host=... is per node; timeouts may differ harmlessly
    "standalone": (JOB, FLAG, False),
    "max_restarts": (JOB, VALUE, 0),  # agents restart together: one that gives up first leaves the rest waiting
    "monitor_interval": (FREE, VALUE, 0.1),
    "start_method": (FREE, VALUE, "spawn"),
    "event_log_handler": (FREE, VALUE, "null"),
    "role": (FREE, VALUE, "default"),
    "module": (FREE, FLAG, False),
    "no_python": (FREE, FLAG, False),
    "run_path": (FREE, FLAG, False),
    "log_dir": (FREE, VALUE, None),
    "redirects": (FREE, VALUE, "0"),
    "tee": (FREE, VALUE, "0"),
    "local_ranks_filter": (FREE, VALUE, ""),
    "duplicate_stdout_filters": (FREE, VALUE, []),
    "duplicate_stderr_filters": (FREE, VALUE, []),
    "node_rank": (NODE, VALUE, 0),
    "master_addr": (JOB, VALUE, "127.0.0.1"),
    "master_port": (JOB, VALUE, None),  # None in the parser: run() sets 29500 (RESOLVED)
    "local_addr": (NODE, VALUE, None),
    "logs_specs": (FREE, VALUE, None),
    "numa_binding": (FREE, VALUE, None),
    "signals_to_handle": (FREE, VALUE, "SIGTERM,SIGINT,SIGHUP,SIGQUIT"),
    "shutdown_timeout": (FREE, VALUE, None),
    "virtual_local_rank": (FREE, FLAG, False),
    # not in torch 2.13's torchrun: 2.14's option, and torch.distributed.launch's (deprecated)
    "log_line_prefix_template": (FREE, VALUE, None),
    "use_env": (FREE, FLAG, False),
    "local_rank": (FREE, VALUE, None),
}

DEEPSPEED: dict[str, Row] = {
    "hostfile": (NODE, VALUE, "/job/hostfile"),
    "include": (JOB, VALUE, ""),
    "exclude": (JOB, VALUE, ""),
    "num_nodes": (JOB, VALUE, -1),  # -1: every host of the hostfile (LATER)
    "num_gpus": (JOB, VALUE, -1),  # -1: every accelerator of the node (LATER)
    "master_port": (JOB, VALUE, 29500),
    "master_addr": (JOB, VALUE, ""),  # "": the first host of the hostfile
    "node_rank": (NODE, VALUE, -1),
    "launcher": (JOB, VALUE, "pdsh"),
    "launcher_args": (FREE, VALUE, ""),
    "module": (FREE, FLAG, False),
    "no_python": (FREE, FLAG, False),
    "no_local_rank": (FREE, FLAG, False),
    "no_ssh": (JOB, FLAG, False),
    "no_ssh_check": (FREE, FLAG, False),
    "force_multi": (JOB, FLAG, False),
    "save_pid": (FREE, FLAG, False),
    "enable_each_rank_log": (FREE, VALUE, "None"),
    "autotuning": (JOB, VALUE, ""),  # tuning experiments on some nodes, training on others: a hang
    "bind_cores_to_rank": (FREE, FLAG, False),
    "bind_core_list": (NODE, VALUE, None),
    "ssh_port": (FREE, VALUE, None),
    "venv_script": (NODE, VALUE, None),
    "log_level": (FREE, VALUE, "info"),
    "quiet": (FREE, FLAG, False),
    # earlier DeepSpeed releases only
    "min_elastic_nodes": (JOB, VALUE, -1),
    "max_elastic_nodes": (JOB, VALUE, -1),
    "elastic_training": (JOB, FLAG, False),
    "comment": (FREE, VALUE, ""),
}

# `accelerate launch`: how the job is distributed and sharded must agree (a different strategy,
# precision, ZeRO stage, FSDP or Megatron layout or accumulation count issues other collectives);
# paths and device lists are per node; compilation, logging and TPU pod details are free.
ACCELERATE: dict[str, Row] = {
    "config_file": (NODE, VALUE, None),
    "quiet": (FREE, FLAG, None),
    "cpu": (JOB, FLAG, False),
    "multi_gpu": (JOB, FLAG, False),
    "tpu": (JOB, FLAG, False),
    "mixed_precision": (JOB, VALUE, None),
    "num_processes": (JOB, VALUE, None),
    "num_machines": (JOB, VALUE, None),
    "num_cpu_threads_per_process": (FREE, VALUE, None),
    "enable_cpu_affinity": (FREE, FLAG, False),
    "dynamo_backend": (FREE, VALUE, None),
    "dynamo_mode": (FREE, VALUE, "default"),
    "dynamo_use_fullgraph": (FREE, FLAG, False),
    "dynamo_use_dynamic": (FREE, FLAG, None),
    "dynamo_use_regional_compilation": (FREE, FLAG, False),
    "use_deepspeed": (JOB, FLAG, False),
    "use_fsdp": (JOB, FLAG, False),
    "use_parallelism_config": (JOB, FLAG, False),
    "use_megatron_lm": (JOB, FLAG, False),
    "gpu_ids": (NODE, VALUE, None),
    "same_network": (JOB, FLAG, False),
    "machine_rank": (NODE, VALUE, None),
    "main_process_ip": (JOB, VALUE, None),
    "main_process_port": (JOB, VALUE, None),
    "tee": (FREE, VALUE, "0"),
    "log_dir": (FREE, VALUE, None),
    "role": (FREE, VALUE, "default"),
    "rdzv_backend": (JOB, VALUE, "static"),
    "rdzv_conf": (NODE, VALUE, ""),
    "max_restarts": (JOB, VALUE, 0),
    "monitor_interval": (FREE, VALUE, 0.1),
    "module": (FREE, FLAG, None),
    "no_python": (FREE, FLAG, None),
    "tpu_cluster": (FREE, FLAG, False),
    "no_tpu_cluster": (FREE, FLAG, True),
    "tpu_use_sudo": (FREE, FLAG, False),
    "vm": (FREE, VALUE, None),
    "env": (FREE, VALUE, None),
    "main_training_function": (FREE, VALUE, None),
    "downcast_bf16": (FREE, FLAG, False),
    "deepspeed_config_file": (NODE, VALUE, None),
    "zero_stage": (JOB, VALUE, None),
    "offload_optimizer_device": (JOB, VALUE, None),
    "offload_param_device": (JOB, VALUE, None),
    "offload_optimizer_nvme_path": (NODE, VALUE, None),
    "offload_param_nvme_path": (NODE, VALUE, None),
    "gradient_accumulation_steps": (JOB, VALUE, None),
    "gradient_clipping": (JOB, VALUE, None),
    "zero3_init_flag": (JOB, VALUE, None),
    "zero3_save_16bit_model": (JOB, VALUE, None),
    "deepspeed_hostfile": (NODE, VALUE, None),
    "deepspeed_exclusion_filter": (JOB, VALUE, None),
    "deepspeed_inclusion_filter": (JOB, VALUE, None),
    "deepspeed_multinode_launcher": (JOB, VALUE, None),
    "deepspeed_moe_layer_cls_names": (JOB, VALUE, None),
    "fsdp_version": (JOB, VALUE, "1"),
    "fsdp_offload_params": (JOB, VALUE, "false"),
    "fsdp_min_num_params": (JOB, VALUE, 100000000),
    "fsdp_sharding_strategy": (JOB, VALUE, "FULL_SHARD"),
    "fsdp_reshard_after_forward": (JOB, VALUE, "true"),
    "fsdp_auto_wrap_policy": (JOB, VALUE, None),
    "fsdp_transformer_layer_cls_to_wrap": (JOB, VALUE, None),
    "fsdp_backward_prefetch": (JOB, VALUE, None),
    "fsdp_state_dict_type": (JOB, VALUE, None),
    "fsdp_forward_prefetch": (JOB, VALUE, "false"),
    "fsdp_use_orig_params": (JOB, VALUE, "true"),
    "fsdp_cpu_ram_efficient_loading": (JOB, VALUE, "true"),
    "fsdp_sync_module_states": (JOB, VALUE, "true"),
    "fsdp_activation_checkpointing": (JOB, VALUE, "false"),
    "fsdp_activation_checkpointing_offload": (JOB, VALUE, "false"),
    "megatron_lm_tp_degree": (JOB, VALUE, 1),
    "megatron_lm_use_custom_fsdp": (JOB, VALUE, False),
    "megatron_lm_no_load_optim": (JOB, VALUE, False),
    "megatron_lm_eod_mask_loss": (JOB, VALUE, False),
    "megatron_lm_overlap_cpu_optimizer_d2h_h2d": (JOB, VALUE, False),
    "megatron_lm_no_save_optim": (JOB, VALUE, False),
    "megatron_lm_optimizer_cpu_offload": (JOB, VALUE, False),
    "megatron_lm_use_precision_aware_optimizer": (JOB, VALUE, False),
    "megatron_lm_decoder_last_pipeline_num_layers": (JOB, VALUE, None),
    "megatron_lm_pp_degree": (JOB, VALUE, 1),
    "megatron_lm_num_micro_batches": (JOB, VALUE, None),
    "megatron_lm_sequence_parallelism": (JOB, VALUE, None),
    "megatron_lm_recompute_activations": (JOB, VALUE, None),
    "megatron_lm_use_distributed_optimizer": (JOB, VALUE, None),
    "megatron_lm_gradient_clipping": (JOB, VALUE, 1.0),
    "megatron_lm_recompute_granularity": (JOB, VALUE, None),
    "megatron_lm_recompute_method": (JOB, VALUE, None),
    "megatron_lm_recompute_num_layers": (JOB, VALUE, None),
    "megatron_lm_attention_backend": (JOB, VALUE, None),
    "megatron_lm_expert_model_parallel_size": (JOB, VALUE, None),
    "megatron_lm_context_parallel_size": (JOB, VALUE, None),
    "megatron_lm_attention_dropout": (JOB, VALUE, None),
    "megatron_lm_hidden_dropout": (JOB, VALUE, None),
    "megatron_lm_attention_softmax_in_fp32": (JOB, VALUE, None),
    "megatron_lm_expert_tensor_parallel_size": (JOB, VALUE, None),
    "megatron_lm_calculate_per_token_loss": (JOB, VALUE, None),
    "megatron_lm_use_rotary_position_embeddings": (JOB, VALUE, None),
    "fp8_backend": (JOB, VALUE, None),
    "fp8_use_autocast_during_eval": (JOB, FLAG, False),
    "fp8_margin": (JOB, VALUE, 0),
    "fp8_interval": (JOB, VALUE, 1),
    "fp8_format": (JOB, VALUE, "HYBRID"),
    "fp8_amax_history_len": (JOB, VALUE, 1024),
    "fp8_amax_compute_algo": (JOB, VALUE, "most_recent"),
    "fp8_override_linear_precision": (JOB, VALUE, (False, False, False)),
    "fp8_opt_level": (JOB, VALUE, "O2"),
    "fp8_enable_fsdp_float8_all_gather": (JOB, VALUE, "true"),
    "fp8_pad_inner_dim": (JOB, VALUE, "true"),
    "aws_access_key_id": (FREE, VALUE, None),
    "aws_secret_access_key": (FREE, VALUE, None),
    "debug": (FREE, FLAG, None),
    "mpirun_hostfile": (NODE, VALUE, None),
    "parallelism_config_dp_replicate_size": (JOB, VALUE, 1),
    "parallelism_config_dp_shard_size": (JOB, VALUE, 1),
    "parallelism_config_tp_size": (JOB, VALUE, 1),
    "parallelism_config_cp_size": (JOB, VALUE, 1),
    "parallelism_config_cp_backend": (JOB, VALUE, "torch"),
    "parallelism_config_cp_comm_strategy": (JOB, VALUE, "allgather"),
    "parallelism_config_sp_size": (JOB, VALUE, 1),
    "parallelism_config_sp_backend": (JOB, VALUE, "deepspeed"),
    "parallelism_config_sp_seq_length": (JOB, VALUE, None),
    "parallelism_config_sp_seq_length_is_variable": (JOB, VALUE, True),
    "parallelism_config_sp_attn_implementation": (JOB, VALUE, "sdpa"),
}

OPTIONS: dict[str, dict[str, Row]] = {"torchrun": TORCHRUN, "deepspeed": DEEPSPEED, "accelerate": ACCELERATE}

# Rows of other releases than the installed ones (the test requires the rest in the parser).
OTHER_RELEASES = {
    "torchrun": ("log_line_prefix_template", "use_env", "local_rank"),
    "deepspeed": ("min_elastic_nodes", "max_elastic_nodes", "elastic_training", "comment"),
    "accelerate": ("fp8_opt_level",),  # MS-AMP's optimization level, gone from accelerate 1.16's parser
}

# Spellings beyond the launcher's usual ones (torchrun: --a-b and --a_b; deepspeed: --a_b;
# accelerate: --a_b and --a-b).
ALIASES = {
    "torchrun": {"module": ("-m",), "redirects": ("-r",), "tee": ("-t",)},
    "deepspeed": {"hostfile": ("-H",), "include": ("-i",), "exclude": ("-e",), "num_gpus": ("--num_accelerators",),
                  "quiet": ("-q",)},
    "accelerate": {"module": ("-m",), "quiet": ("-q",), "tee": ("-t",)},
}  # fmt: skip

# Defaults the parser leaves None and the launcher fills in at start (torchrun's run(): "if
# args.master_port is None: args.master_port = 29500"; its help says "Defaults to 29500").
RESOLVED: dict[str, dict[str, Any]] = {"torchrun": {"master_port": 29500}}

# Options (names, or prefixes) whose value for a node that omits them the launcher decides only at
# start, from what no command line shows: deepspeed's -1 (every host of the hostfile, every
# accelerator), and accelerate's config file (its distributed type sets the strategy flags, its
# sections the dynamo/fsdp/fp8/megatron/parallelism settings). A parser default of None is
# decided at start too. A node that omits such an option is not compared for it.
LATER = {
    "deepspeed": ("num_nodes", "num_gpus"),
    "accelerate": (
        "cpu",
        "multi_gpu",
        "tpu",
        "use_",
        "dynamo_",
        "fsdp_",
        "fp8_",
        "megatron_lm_",
        "parallelism_config_",
    ),
}
NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")  # --nproc-per-node values torchrun resolves at start


def spellings(tool: str, name: str) -> tuple[str, ...]:
    """Every spelling of option ``name`` of ``tool``, the usual one first."""
    dashed, under = f"--{name.replace('_', '-')}", f"--{name}"
    usual = (under,) if tool == "deepspeed" or dashed == under else (under, dashed)
    if tool == "torchrun":
        usual = usual[::-1]
    return usual + ALIASES.get(tool, {}).get(name, ())


def spelling_table(tool: str) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """name -> (takes a value, spellings): what ``facts.command.parse_options`` reads."""
    return {name: (takes, spellings(tool, name)) for name, (_, takes, _) in OPTIONS[tool].items()}


def default(tool: str, name: str) -> Any:
    """The value ``tool`` uses for ``name`` when it is not given (None: decided at start)."""
    resolved = RESOLVED.get(tool, {})
    return resolved[name] if name in resolved else OPTIONS[tool][name][2]


def _value(tool: str, name: str, raw: str, model: Any) -> Any:
    """A given value in the parser's terms (``2`` and ``02`` are one value), None when it is
    resolved only at start (``--nproc-per-node=gpu``)."""
    text = raw.strip()
    if tool == "torchrun" and name == "nproc_per_node" and text in NPROC_WORDS:
        return None
    if tool == "torchrun" and name == "nnodes":
        return text if ":" in text else f"{text}:{text}"  # N is N:N
    try:
        if isinstance(model, int) and not isinstance(model, bool):
            return int(text)
        if isinstance(model, float):
            return float(text)
    except ValueError:
        pass
    return text


def effective(tool: str, name: str, options: dict[str, str], env: dict[str, str]) -> tuple[Any, str] | None:
    """(the value to compare, the value as shown) of option ``name`` on a node launched with
    ``options``; None when it is known only at start. A node that omits the option has the
    launcher's default: for torchrun its ``PET_<NAME>`` variable, else the parser's default."""
    _, takes, model = OPTIONS[tool][name]
    raw, shown = options.get(name), ""
    pet = f"PET_{name.upper()}"
    if raw is None and tool == "torchrun" and pet in env:
        raw, shown = env[pet], f" ({pet})"
        if not takes:  # torchrun's check_env: bool(int(value))
            on = raw.strip() not in ("", "0")
            return on, ("set" if on else "not set") + shown
    if raw is not None:
        if not takes:
            return True, "set"
        value = _value(tool, name, raw, model)
        return None if value is None else (value, raw[:200] + shown)
    fallback = default(tool, name)
    if fallback is None or name.startswith(LATER.get(tool, ())):
        return None
    if not takes:
        return bool(fallback), "not set"
    return _value(tool, name, str(fallback), fallback), f"{fallback} (the default)"
