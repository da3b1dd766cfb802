"""The ways stacks print who wrote a line, as data: one table, tried in order at the front of a line.

Each ``Shape`` is a prefix a launcher, framework or collector puts before a line, with the groups of its
pattern that give the global rank, the local rank, the agent's stream (``node``), the host and the pid. A
field is set only where its group matched; ``weak`` keeps a node already known. ``case`` names a corpus
case (``tests/corpus/diagnose/cases/``) that shows the shape; ``tests/diagnose/test_rankshapes.py`` reads
every example. Prefixes nest (a container's name, then Ray's actor, then c10d's ``[rank3]:``): ``peel``
takes up to six in a row.

Ranks in other places than the front of a line are read elsewhere: c10d's ``[Rank N]`` and the store
barrier's ``rank: N`` inside messages (``logs.rank_in_message``, the families' ``reporter``), srun's
``srun: error: HOST: task N: ...`` (``families``), NCCL's ``host:pid`` via its ``Init`` lines
(``ranks.RankMap``). Complements are resolved against the world size where the log gives it: the ranks
missing from a store barrier's arrivals (``causes.startup.store_barrier``) and from Horovod's ready
lists (``causes.collective.horovod``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from validator.diagnose.events import Ident

# pdsh (DeepSpeed's multi-node launcher) and pdsh-like tools: "10.0.87.143: " or "worker-1: ", even
# twice. A name must have a hyphen and be followed by what opens a log line (a bracket, indentation, a
# traceback, an exception, a level, an NCCL prefix, another name), so "RuntimeError: " or "step 3: "
# are never taken for a host.
HOST_TAG = (
    r"((?:\d{1,3}\.){3}\d{1,3}|[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[a-z0-9\-]+)*"
    r"(?=: (?:[\[(\s]|\d{4}-|Traceback|[A-Z]\w*(?:Error|Exception)\b|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b"
    r"|[\w.\-]+:\d+:\d+ \[|(?:\d{1,3}\.){3}\d{1,3}: |[a-z][a-z0-9]*(?:-[a-z0-9]+)+: ))"
    # a name without a hyphen ("node01") only before NCCL's own "host:pid:tid [dev]" prefix, or as nccl-tests prints its
    # host before its checks' failures (common.cu: printf("%s: Test CUDA failure %s:%d '%s'\n", hostname, ...))
    r"|[a-z][a-z0-9]*\d(?=: [\w.\-]+:\d+:\d+ \[)|[A-Za-z][\w.\-]{0,62}(?=: Test (?:NCCL |CUDA )?failure )): "
)
# docker compose logs: "worker-1  | ", "1469.worker.1  | " (the container, padded to the longest name;
# it ends with the replica's number, so a loguru "ERROR    | " is no container)
# or a container_name of the user's choosing, lower case with a separator, before compose's padding (two spaces at least)
COMPOSE_TAG = (
    r"((?:\d+\.)?[A-Za-z][\w.\-]{0,62}?[_.\-]\d{1,4}|[a-z][a-z0-9]*(?:[_.\-][a-z0-9]+){1,8}(?= {2})) {1,32}\| "
)


@dataclass(frozen=True, slots=True)
class Shape:
    stack: str
    example: str  # the prefix as printed, followed by a message
    case: str  # a corpus case showing it
    pattern: re.Pattern[str]
    rank: int = 0  # group of the global rank (0: the shape gives none)
    local: int = 0  # group of the local rank
    node: int = 0  # group naming the agent's stream (srun label, pod, container, host)
    host: int = 0
    pid: int = 0
    weak: bool = False  # the node only where no other prefix gave one


def _s(stack: str, example: str, case: str, pattern: str, **groups: int | bool) -> Shape:
    return Shape(stack, example, case, re.compile(pattern), **groups)  # type: ignore[arg-type]


SHAPES: tuple[Shape, ...] = (
    # Open MPI --tag-output (mpirun, horovodrun over MPI): "[jobid,rank]<stream>:"
    _s("mpirun", "[1,1]<stderr>:", "n11-horovod-mpi-rank1-tf-oom.log", r"\[\d+,(\d+)\]<(?:stdout|stderr)>:\s?", rank=1),
    # horovodrun's gloo launcher (horovod/runner/gloo_run.py): "[rank]<stream>:"
    _s(
        "horovodrun",
        "[1]<stderr>:",
        "n18-horovodrun-rank1-nccl-init-cuda-error.log",
        r"\[(\d{1,7})\]<(?:stdout|stderr)>:\s?",
        rank=1,
    ),
    # c10d / torchrun's own rank prefix (TORCH_DISTRIBUTED_DEBUG, torch >= 2.4 logging): "[rank5]:"
    _s("torchrun", "[rank1]:", "06-watchdog-seqnum-divergence-wrapped.log", r"\[rank(\d+)\]:\s?", rank=1),
    # Lightning (lightning_fabric/utilities/rank_zero.py rank_prefixed_message): f"[rank: {rank}] {message}"
    _s("lightning", "[rank: 1] ", "", r"\[rank: (\d+)\] ", rank=1),
    # ParlAI (facebookresearch/ParlAI a29567f, parlai/utils/distributed.py distributed_context): print_prefix =
    # 'rank:{:3d} |'.format(rank), put before print()'s arguments and before the logger's format (add_format_prefix)
    _s("parlai", "rank:  3 | ", "", r"rank: {0,2}(\d{1,7}) \|\s?", rank=1),
    # vLLM's multiproc workers (decorate_logs(process_name), process_name "Worker" + "_DP{}" "_PP{}" "_TP{}" ...):
    # with tensor parallelism alone the TP rank is the worker's rank
    _s(
        "vllm",
        "(Worker_TP0 pid=160)",
        "n10-vllm-worker-tp0-oom.log",
        r"\(Worker_TP(\d+)(?:_DCP\d+)?(?:_EP\d+)? pid=(\d{1,9})\)\s?",
        rank=1,
        pid=2,
    ),
    # vLLM V1's multiproc workers before decorate_logs (vllm/v1/executor/multiproc_executor.py WorkerProc: _add_prefix(
    # sys.stdout, f"VllmWorker rank={rank}", pid), the prefix f"({worker_name} pid={pid}) "): the rank of the executor's
    # world
    _s(
        "vllm",
        "(VllmWorker rank=6 pid=5489)",
        "v12-gpustack-vllm-worker6-oom.log",
        r"\(VllmWorker rank=(\d{1,7}) pid=(\d{1,9})\)\s?",
        rank=1,
        pid=2,
    ),
    # Ray actor and worker prefixes (also vLLM's other worker names): "(RayTrainWorker pid=7, ip=10.0.0.2) "
    _s(
        "ray",
        "(RayWorkerWrapper pid=92234, ip=172.19.24.110)",
        "n01-ray-workerwrapper-remote-error.log",
        r"\((?:[\w.]+ )?pid=(\d{1,9})(?:, ip=([\w.:\-]{1,64}))?\)\s?",
        pid=1,
        host=2,
    ),
    # kubectl logs --prefix: "[pod/train-worker-1/pytorch] "
    _s("kubernetes", "[pod/train-worker-1/pytorch]", "", r"\[pod/([\w.\-]{1,253})/[\w.\-]{1,63}\]\s?", node=1, host=1),
    _s("pdsh", "worker-1: [rank0]:", "", HOST_TAG, node=1, host=1),
    # stern (stern/stern, its default template "{{.PodName}} {{.ContainerName}} {{.Message}}"): a pod name (a hyphen and a
    # replica suffix with a digit: "train-worker-1", "job-x7k2p") and a container name, then what opens a failure's line
    # (a c10d or torchrun prefix, a glog header, a traceback, an exception, an NCCL line): "step-10 loss INFO" is no pod
    _s(
        "stern",
        "train-worker-1 pytorch [rank1]:",
        "",
        r"([a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?=[a-z]*\d)[a-z0-9]{1,5}) [a-z][a-z0-9\-]{0,62} "
        r"(?=\[(?:rank\d|default\d|[IWEF]\d{4} )|Traceback|[A-Z]\w*(?:Error|Exception)\b|[\w.\-]+:\d+:\d+ \[)",
        node=1,
        host=1,
    ),
    # a log collector's table that puts the pod's replica name before the line: "master-0 >> " (Kubeflow names replica
    # pods <type>-<index>; no public source of this collector's format was found, so only that name shape is taken)
    _s("collector", "master-0 >> [rank1]:", "", r"([a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d{1,5}) >> ", node=1, host=1),
    # Polyaxon's job logs (polyaxon/logs_handlers/log_queries/base.py process_log_line: LogSpec(log_line, name=
    # f"{task_type}.{task_idx}"), printed "<time> UTC <name> -- <line>"): the replica's name, then the line
    _s(
        "polyaxon",
        "master.0 -- [1,0]<stderr>:",
        "z19-polyaxon-mpirun-spliced-stalled-ranks-r0.log",
        r"([a-z]+\.\d{1,5}) -- ",
        node=1,
    ),
    _s("docker compose", "vllm1-1  | ", "p29-compose-rocm-watchdog-hip-check-frames.log", COMPOSE_TAG, node=1, host=1),
    # Determined's harness (determined-ai/determined harness/determined/launch/wrap_rank.py forward_stream): f"[rank={rank}]
    # {line}" on every line a worker prints, behind the container id in brackets where the web UI copies it ("[] " when
    # it has none)
    _s(
        "determined",
        "[rank=0] ",
        "u13-determined-trial-rank0-cuda-oom.log",
        r"(?:\[[0-9a-f]{0,64}\] )?\[rank=(\d{1,9})\] ",
        rank=1,
    ),
    # Determined's CLI (`det trial logs`): the level in angle brackets, padded ("<info>    ", "<>        " where none),
    # then the time stamp, the container id and "|| " (the shape below)
    _s(
        "determined",
        "<>        [2021-12-07 10:43:01] ",
        "u16-determined-horovod-gloo-first-process.log",
        r"<\w{0,8}> {1,12}\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]{0,12}\] ",
    ),
    # Determined: "[ts] 5c902731 [rank=1] || "
    _s("determined", "5c902731 [rank=1] ||", "", r"(?:[0-9a-f]{8} )?(?:\[rank=(\d{1,9})\] )?\|\|\s?", rank=1),
    # torchrun --tee with a template: "[default-r5-l1]:" (role, global rank, local rank)
    _s("torchrun", "[default-r5-l1]:", "", r"\[([A-Za-z_][\w]*)-r(\d+)-l(\d+)\]:\s?", rank=2, local=3),
    # torchrun --tee: "[default3]:" (role + local rank; "[default3|1]:" with restarts)
    _s(
        "torchrun",
        "[default0]:",
        "b061-default0-prefix-rank12-uncorrectable-ecc.log",
        r"\[([A-Za-z_][A-Za-z_\-]*?)(\d+)(?:\|\d+)?\]:\s?",
        local=2,
    ),
    # torchrun --role $(hostname -s): "[gpu187:2]:" (host and local rank)
    _s(
        "torchrun",
        "[gpu187:2]:",
        "a045-slurm-role-prefix-host-localrank-oom.log",
        r"\[(?![\w.\-]*\.py:)([A-Za-z][\w.\-]{0,62}):(\d{1,4})\]:\s?",
        node=1,
        host=1,
        local=2,
    ),
    # SGLang's scheduler logger (configure_logger(prefix=" DP{} TP{} EP{} PP{}")): "[2025-04-21 07:28:41 TP6] ", read
    # after the time stamp; with tensor parallelism alone the TP rank is the scheduler's rank
    _s("sglang", "TP6] ", "n14-sglang-tp6-monitored-barrier-from-rank0.log", r"TP(\d+)(?: EP\d+)?\] ", rank=1),
    _s("sglang", "DP1 TP1] ", "", r"(?:DP\d+ )?(?:PP\d+ )?TP\d+(?: EP\d+)?(?: PP\d+)?\] "),
    # JSON-lines collectors: docker's json-file driver ({"log":"...","stream":...}), milabench ({"event": "line",
    # "data": "..."}): the line is the string value
    _s(
        "json lines",
        '{"event": "line", "data": "',
        "p14-json-event-lines-hip-launch-failure-rank3.log",
        r'\{(?:"\w+": ?"[^"]{0,32}", ?){0,2}"(?:log|data|message)": ?"',
    ),
    # accelerate's test runner (huggingface/accelerate src/accelerate/test_utils/testing.py _stream_subprocess): tee(line,
    # ..., label="stdout:") / label="stderr:", i.e. print(label, line): a child's output re-printed, one stream each
    _s(
        "accelerate",
        "stderr: [1]:",
        "u09-accelerate-test-stderr-prefixed-summary.log",
        r"(std(?:out|err)): ",
        node=1,
    ),
    # a paste quoted in Markdown ("> " before a prefix the line carried; nested "> > "; before a host tag or NCCL's
    # "host:pid:tid [dev]" prefix), or opening its inline code ("`" left where the paste lost the fence)
    _s(
        "quote",
        "> [] [rank=0] ",
        "u13-determined-trial-rank0-cuda-oom.log",
        r"(?:(?:> ?){1,3}|`{1,3})(?=[\[(<]|[\w.\-]+:\d+:\d+ \[|[a-z][a-z0-9.\-]*\d: )",
    ),
    # srun --label: "3: " (the task id)
    _s("srun", "3: ", "a008-srun-prefix-duplicate-gpu-rank3-rank0.log", r"(\d{1,6}): ", node=1),
    # a bracketed number (an MPI-like tag, a pid): the stream only
    _s(
        "bracketed",
        "[80746] [rank0]:",
        "05-watchdog-uniform-timeout-then-sigabrt.log",
        r"\[(\d{1,7})\] (?=\S)",
        node=1,
        weak=True,
    ),
)


def peel(text: str, ident: Ident) -> tuple[str, str]:
    """Peel rank prefixes off the front of a line into ``ident``; returns (stream key, rest)."""
    pos = 0
    for _ in range(6):
        for shape in SHAPES:
            if m := shape.pattern.match(text, pos):
                break
        else:
            break
        if shape.rank and m.group(shape.rank) is not None:
            ident.rank = int(m.group(shape.rank))
        if shape.local:
            ident.local_rank = int(m.group(shape.local))
        if shape.pid:
            ident.pid = int(m.group(shape.pid))
        if shape.host and m.group(shape.host) is not None:
            ident.host = m.group(shape.host)
        if shape.node and not (shape.weak and ident.node):
            ident.node = m.group(shape.node)
        if m.end() == pos:  # an empty match (Determined's optional parts) ends the prefixes
            break
        pos = m.end()
    return text[:pos].strip(), text[pos:]
