"""Parse a launch command (torchrun, python -m torch.distributed.run, deepspeed, accelerate launch).

Mirrors the launchers' own argparse tables (torch 2.13/2.14 ``torch/distributed/run.py``,
DeepSpeed ``launcher/runner.py``): dash and underscore spellings, ``--opt=value``, unique-prefix
abbreviations (argparse's default), flags versus options that take a value, and the first
positional argument ending the launcher's options.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from validator.model import CommandFacts

# dest -> (takes a value, spellings). dest is what torchrun's PET_<DEST> fallback uses.
TORCHRUN: dict[str, tuple[bool, tuple[str, ...]]] = {
    "nnodes": (True, ("--nnodes",)),
    "nproc_per_node": (True, ("--nproc-per-node", "--nproc_per_node")),
    "rdzv_backend": (True, ("--rdzv-backend", "--rdzv_backend")),
    "rdzv_endpoint": (True, ("--rdzv-endpoint", "--rdzv_endpoint")),
    "rdzv_id": (True, ("--rdzv-id", "--rdzv_id")),
    "rdzv_conf": (True, ("--rdzv-conf", "--rdzv_conf")),
    "standalone": (False, ("--standalone",)),
    "max_restarts": (True, ("--max-restarts", "--max_restarts")),
    "monitor_interval": (True, ("--monitor-interval", "--monitor_interval")),
    "start_method": (True, ("--start-method", "--start_method")),
    "event_log_handler": (True, ("--event-log-handler", "--event_log_handler")),
    "role": (True, ("--role",)),
    "module": (False, ("-m", "--module")),
    "no_python": (False, ("--no-python", "--no_python")),
    "run_path": (False, ("--run-path", "--run_path")),
    "log_dir": (True, ("--log-dir", "--log_dir")),
    "redirects": (True, ("-r", "--redirects")),
    "tee": (True, ("-t", "--tee")),
    "local_ranks_filter": (True, ("--local-ranks-filter", "--local_ranks_filter")),
    "duplicate_stdout_filters": (
        True,
        ("--duplicate-stdout-filters", "--duplicate_stdout_filters"),
    ),
    "duplicate_stderr_filters": (
        True,
        ("--duplicate-stderr-filters", "--duplicate_stderr_filters"),
    ),
    "node_rank": (True, ("--node-rank", "--node_rank")),
    "master_addr": (True, ("--master-addr", "--master_addr")),
    "master_port": (True, ("--master-port", "--master_port")),
    "local_addr": (True, ("--local-addr", "--local_addr")),
    "logs_specs": (True, ("--logs-specs", "--logs_specs")),
    "numa_binding": (True, ("--numa-binding", "--numa_binding")),
    "signals_to_handle": (True, ("--signals-to-handle", "--signals_to_handle")),
    "shutdown_timeout": (True, ("--shutdown-timeout", "--shutdown_timeout")),
    "log_line_prefix_template": (
        True,
        ("--log-line-prefix-template", "--log_line_prefix_template"),
    ),
    "virtual_local_rank": (False, ("--virtual-local-rank", "--virtual_local_rank")),
    # torch.distributed.launch (deprecated) only
    "use_env": (False, ("--use-env", "--use_env")),
    "local_rank": (True, ("--local-rank", "--local_rank")),
}

DEEPSPEED: dict[str, tuple[bool, tuple[str, ...]]] = {
    "hostfile": (True, ("-H", "--hostfile")),
    "include": (True, ("-i", "--include")),
    "exclude": (True, ("-e", "--exclude")),
    "num_nodes": (True, ("--num_nodes",)),
    "min_elastic_nodes": (True, ("--min_elastic_nodes",)),
    "max_elastic_nodes": (True, ("--max_elastic_nodes",)),
    "num_gpus": (True, ("--num_gpus", "--num_accelerators")),
    "master_port": (True, ("--master_port",)),
    "master_addr": (True, ("--master_addr",)),
    "node_rank": (True, ("--node_rank",)),
    "launcher": (True, ("--launcher",)),
    "launcher_args": (True, ("--launcher_args",)),
    "module": (False, ("--module",)),
    "no_python": (False, ("--no_python",)),
    "no_local_rank": (False, ("--no_local_rank",)),
    "no_ssh_check": (False, ("--no_ssh_check",)),
    "no_ssh": (False, ("--no_ssh",)),
    "force_multi": (False, ("--force_multi",)),
    "save_pid": (False, ("--save_pid",)),
    "enable_each_rank_log": (True, ("--enable_each_rank_log",)),
    "autotuning": (True, ("--autotuning",)),
    "elastic_training": (False, ("--elastic_training",)),
    "bind_cores_to_rank": (False, ("--bind_cores_to_rank",)),
    "bind_core_list": (True, ("--bind_core_list",)),
    "ssh_port": (True, ("--ssh_port",)),
    "comment": (True, ("--comment",)),
}


def _both(*dests: str) -> dict[str, tuple[str, ...]]:
    """accelerate spells every long option with underscores and with dashes."""
    return {d: (f"--{d}", f"--{d.replace('_', '-')}") for d in dests}


# `accelerate launch` (accelerate 1.15, accelerate/commands/launch.py). Every flag (nargs=0) is
# listed, so an option that is not listed takes a value (accelerate has ~100 of them); only the
# values the launch contract needs are named.
ACCELERATE_FLAGS = (
    "cpu", "debug", "downcast_bf16", "dynamo_use_dynamic", "dynamo_use_fullgraph",
    "dynamo_use_regional_compilation", "enable_cpu_affinity", "fp8_use_autocast_during_eval", "multi_gpu",
    "no_python", "no_tpu_cluster", "same_network", "tpu", "tpu_cluster", "tpu_use_sudo", "use_deepspeed",
    "use_fsdp", "use_megatron_lm", "use_parallelism_config",
)  # fmt: skip
ACCELERATE_VALUES = ("config_file", "num_processes", "num_machines", "machine_rank", "main_process_ip",
                     "main_process_port", "rdzv_backend", "rdzv_conf", "max_restarts")  # fmt: skip
ACCELERATE: dict[str, tuple[bool, tuple[str, ...]]] = {
    **{d: (False, s) for d, s in _both(*ACCELERATE_FLAGS).items()},
    "module": (False, ("-m", "--module")),
    "quiet": (False, ("-q", "--quiet")),
    **{d: (True, s) for d, s in _both(*ACCELERATE_VALUES).items()},
}

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
PYTHONS = ("python", "python3")
PYTHON_OPTS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")  # `python -X dev -m ...`


def identify(argv: list[str]) -> tuple[str, list[str]]:
    """Which launcher ``argv`` runs, and its arguments after the launcher itself."""
    if not argv:
        return "other", []
    prog = os.path.basename(argv[0])
    if prog == "torchrun":
        return "torchrun", argv[1:]
    if prog == "deepspeed":
        return "deepspeed", argv[1:]
    if prog == "accelerate" and argv[1:2] == ["launch"]:
        return "accelerate", argv[2:]
    if prog == "accelerate-launch":
        return "accelerate", argv[1:]
    if prog.startswith(PYTHONS):
        rest = argv[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            # interpreter flags such as -u, -O; -X/-W take a value unless it is attached (-Xdev)
            rest = rest[2:] if rest[0] in PYTHON_OPTS_WITH_VALUE else rest[1:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1] in TORCHRUN_MODULES:
            return "torchrun", rest[2:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1].startswith("deepspeed.launcher"):
            return "deepspeed", rest[2:]
        return "python", rest
    return "other", argv[1:]


def _spellings(table: dict[str, tuple[bool, tuple[str, ...]]]) -> dict[str, str]:
    return {s: dest for dest, (_, names) in table.items() for s in names}


def parse_options(
    args: list[str], table: dict[str, tuple[bool, tuple[str, ...]]], unknown_take_values: bool = False
) -> tuple[dict[str, str], str | None, list[str], list[str]]:
    """argparse-compatible scan: (options, script, script args, errors). With
    ``unknown_take_values`` (a table that lists every flag), an unlisted ``--opt`` takes a value."""
    spell = _spellings(table)
    longs = [s for s in spell if s.startswith("--")]
    options: dict[str, str] = {}
    errors: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name, eq, inline = arg.partition("=")
        if name not in spell and name.startswith("--"):
            matches = sorted({spell[s] for s in longs if s.startswith(name)})
            if len(matches) == 1:
                name = next(s for s in longs if spell[s] == matches[0])
            elif matches:
                errors.append(f"ambiguous option {name}: could match {', '.join(matches)}")
                i += 1
                continue
        if name not in spell:
            if unknown_take_values and name.startswith("--"):
                i += 1 if eq else 2
                continue
            errors.append(f"unrecognized option {arg}")
            i += 1
            continue
        dest = spell[name]
        takes_value = table[dest][0]
        if not takes_value:
            options[dest] = "1"
            i += 1
        elif eq:
            options[dest] = inline
            i += 1
        elif i + 1 < len(args):
            options[dest] = args[i + 1]
            i += 2
        else:
            errors.append(f"option {name} expects a value")
            i += 1
    script = args[i] if i < len(args) else None
    return options, script, args[i + 1 :], errors


def parse_command(argv: list[str]) -> CommandFacts:
    tool, rest = identify(argv)
    table = {"torchrun": TORCHRUN, "deepspeed": DEEPSPEED, "accelerate": ACCELERATE}.get(tool)
    if table is None:
        script = rest[0] if tool == "python" and rest else None
        return {"tool": tool, "argv": argv, "options": {}, "script": script, "errors": []}
    options, script, _, errors = parse_options(rest, table, unknown_take_values=tool == "accelerate")
    if script is None:
        errors.append(f"{tool}: no training script given")
    return {"tool": tool, "argv": argv, "options": options, "script": script, "errors": errors}
