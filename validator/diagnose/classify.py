"""Message text -> event kind, role and parsed fields (reference/launch-env.md §3).

Rules key on message text, never on source line numbers (``ProcessGroupNCCL.cpp:632`` moves
between releases). Each rule has a cheap substring guard before its regex. The first rule that
matches wins, so specific rules come before the generic exception rule.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Any

from validator.diagnose.events import Role
from validator.diagnose.families import FAMILIES, NOT_AN_ERROR, UNKNOWN_ERROR, enrich


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    role: Role
    guard: str
    pattern: re.Pattern[str]


def _r(kind: str, role: Role, guard: str, pattern: str, flags: int = 0) -> Rule:
    return Rule(kind, role, guard, re.compile(pattern, flags))


ORG, S, M, F = Role.ORIGIN, Role.SYMPTOM, Role.SUMMARY, Role.FACT
RULES: tuple[Rule, ...] = (
    *(_r(*f) for f in FAMILIES),
    # --- mismatched collectives (DETAIL fingerprints, older shape checks)
    _r(
        "coll.detail_mismatch",
        ORG,
        "Detected mismatch between collectives",
        r"Rank (?P<a>\d+) is running collective: (?P<fa>.*?), but Rank (?P<b>\d+) is running collective: (?P<fb>.*)",
    ),
    _r(  # an excerpt cut before ", but Rank B ..."
        "coll.detail_mismatch",
        ORG,
        "Detected mismatch between collectives",
        r"Rank (?P<a>\d+) is running collective: (?P<fa>.*)",
    ),
    _r(  # torch 1.10-1.12's ProcessGroupWrapper.cpp: "Detected mismatch between collectives on ranks. Rank {} is running
        # inconsistent collective: {fingerprint}": the rank that found its own call differing, the others' not printed
        "coll.detail_mismatch",
        ORG,
        "Detected mismatch between collectives",
        r"Rank (?P<reporter>\d+) is running inconsistent collective: (?P<fself>.*)",
    ),
    _r(  # the header alone (ProcessGroupWrapper.cpp's "Detected mismatch between collectives on ranks. Rank " ...), its
        # ranks wrapped onto lines of their own or cut
        "coll.detail_mismatch",
        ORG,
        "Detected mismatch between collectives",
        r"Detected mismatch between collectives on ranks\.?\s*$",
    ),
    # DDP's construction check (torch/csrc/distributed/c10d/reducer.cpp verify_params_across_processes): "DDP expects
    # same model across all ranks, but Rank %d has %d params, while rank %d has inconsistent %d params." (and the
    # shape variant): the ranks built different models, before any collective of the job ran
    _r(
        "coll.model_mismatch",
        ORG,
        "DDP expects same model across all ranks",
        r"DDP expects same model across all ranks",
    ),
    _r(
        "coll.shape_verify",
        ORG,
        "Error when verifying shape tensors",
        r"for collective (?P<op>\w+) on rank (?P<rank>\d+)",
    ),
    # TensorFlow's collective param resolver (core/common_runtime/collective_param_resolver_local.cc):
    # errors::InvalidArgument("Shape mismatch in the collective instance ", instance_key, ". Op at device ", device,
    # " expected shape ", ..., " but another member in the group expected shape ", ...): two members called one
    # collective instance with different shapes; the device is the one that noticed, not the one that diverged
    _r(
        "coll.shape_verify",
        ORG,
        "Shape mismatch in the collective instance",
        r"Shape mismatch in the collective instance (?P<instance>\d+)\. Op at device (?P<device>\S+) expected shape",
    ),
    _r(
        "coll.monitored_barrier",
        ORG,
        "monitoredBarrier",
        r"Ranks? (?P<ranks>\d+(?:\s*,\s*\d+)*) failed to pass monitoredBarrier",
    ),
    # --- desync report (TORCH_NCCL_DESYNC_DEBUG)
    _r("coll.desync_never_joined", ORG, "lagging ranks", r"ranks \[(?P<ranks>[\d, ]+)\] are the lagging ranks"),
    _r(
        "coll.desync_not_finished",
        ORG,
        "didn't finish collective",
        r"\[(?P<ranks>[\d, ]+)\] joined but didn't finish collective #(?P<seq>\d+)",
    ),
    _r(
        "coll.desync_not_joined",
        ORG,
        "didn't join collective",
        r"\[(?P<ranks>[\d, ]+)\] finished collective #(?P<seq>\d+), but didn't join collective #(?P<next>\d+)",
    ),
    # --- collective timeouts
    _r(
        "coll.watchdog_timeout",
        S,
        "aught collective operation timeout",
        # ProcessGroupNCCL.cpp WorkNCCL::checkTimeout: "Watchdog caught collective operation timeout: {work}
        # ran for {ms} milliseconds before timing out." (a hard-wrapped line may lose the tail); torch 1.9-1.11 raised
        # "[Rank N] Caught collective operation timeout: {work} ran for ..." from work.wait() (TensorShape, no Numel)
        r"(?:Watchdog c|C)aught collective operation timeout(?:: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
        r"(?:.*?NumelIn=(?P<numel>\d+))?(?:.*?\) ran for (?P<ms>\d+) milliseconds)?)?",
    ),
    _r(
        "coll.watchdog_status",
        S,
        "ast enqueued",
        r"(?:at (?:NCCL )?work(?: sequence id)?:? (?P<seq>\d+),? (?:PG status: )?)?[Ll]ast enqueued (?:NCCL )?work: (?P<enq>-?\d+), "
        r"last completed (?:NCCL )?work: (?P<done>-?\d+)",
    ),
    _r(
        "coll.gloo_timeout", S, "Timed out waiting", r"Timed out waiting (?P<ms>\d+)ms for (?P<dir>recv|send) operation"
    ),
    _r("coll.blocking_wait", S, "timed out in blocking wait", r"timed out in blocking wait"),
    _r("coll.heartbeat", S, "watchdog got stuck", r"got stuck for (?P<s>\d+) seconds"),
    _r("coll.heartbeat", S, "Heartbeat monitor timed out", r"Heartbeat monitor timed out"),
    # ProcessGroupNCCL's HeartbeatMonitor (torch 2.4+) getNCCLWatchdogTimeoutExitMsg: LOG(FATAL) "Terminating the process
    # after attempting to dump debug info, due to " exitReason ".", the reason "ProcessGroupNCCL watchdog hang" when the
    # watchdog's heartbeat stopped (the line that says so alone may be all a paste kept)
    _r("coll.heartbeat", S, "watchdog hang", r"dump debug info, due to \w+ watchdog hang"),
    # ProcessGroupNCCL.cpp: "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA
    # kernels, subsequent GPU operations might run on corrupted/incomplete data." (the watchdog's teardown)
    _r("coll.watchdog_teardown", S, "Some NCCL operations have failed or timed out", r"Some NCCL operations"),
    # --- CUDA, memory (before the NCCL/watchdog wrappers that quote them)
    _r(
        "cuda.oom",
        ORG,
        "out of memory",
        r"(?:CUDA out of memory|CUDA error: out of memory|Cuda failure (?:\d+ |\S+:\d+ )?'out of memory'|OutOfMemoryError)",
    ),
    # torch's OutOfMemoryError (the caching allocator's TORCH_CHECK_WITH(OutOfMemoryError, ...): torch.OutOfMemoryError,
    # torch.cuda.OutOfMemoryError) whose message a paste put on the next line
    _r("cuda.oom", ORG, "OutOfMemoryError", r"\bOutOfMemoryError\b"),
    # XLA's allocators (xla/stream_executor, the BFC allocator): "RESOURCE_EXHAUSTED: Out of memory while trying to
    # allocate %d bytes." (JAX's XlaRuntimeError, a failed replica's execution); TensorFlow's BFC allocator: "OOM when
    # allocating tensor with shape%s and type %s on %s by allocator %s"
    _r("cuda.oom", ORG, "RESOURCE_EXHAUSTED", r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate"),
    _r("cuda.oom", ORG, "OOM when allocating", r"\bOOM when allocating tensor\b"),
    # Paddle (platform/enforce.h build_nvidia_error_msg for cudaError_t): "CUDA error(%d), %s." as ExternalError
    _r("cuda.oom", ORG, "CUDA error(2), ", r"\bCUDA error\(2\), out of memory"),
    _r("cuda.error", ORG, "CUDA error(", r"\bCUDA error\((?P<code>\d+)\), (?P<what>[^.\n]+)"),
    # CNTK's CudaCall (Math/GPUMatrix.cu, CUDA_CALL / CUBLAS_CALL / ...): "%s failure %d; GPU=%d ; hostname=%s ; expr=%s"
    _r("cuda.oom", ORG, "CUDA failure 2; ", r"\bCUDA failure 2; GPU="),
    _r(
        "cuda.error", ORG, " failure ", r"\b(?P<what>(?:CUDA|CUBLAS|CUDNN|CURAND|CUSPARSE) failure (?P<code>\d+)); GPU="
    ),
    # c10's C10_CUDA_DRIVER_CHECK (c10/cuda/driver_api.h): "CUDA driver error: " + the driver's error string
    _r("cuda.error", ORG, "CUDA driver error: ", r"CUDA driver error: (?P<what>[^.\n]+)"),
    _r("cuda.error", ORG, "CUDA error", r"CUDA error: (?P<what>[^.\n]+)"),
    # Triton's driver (third_party/nvidia/backend/driver.c): "Triton Error [CUDA]: %s", the CUDA error string
    _r("cuda.error", ORG, "Error [CUDA]", r"Error \[CUDA\]: (?P<what>[^.\n]+)"),
    # NCCL's CUDACHECK "Cuda failure '%s'" ("Cuda failure %d '%s'" since 2.1x); nccl-tests' older "Cuda failure %s:%d '%s'"
    _r("cuda.error", ORG, "Cuda failure", r"Cuda failure (?:\d+ |\S+:\d+ )?'(?P<what>[^']+)'"),
    _r("cuda.error", ORG, "CUDA error during", r"CUDA error during (?:start|end) event query"),
    _r("host.oom", ORG, "oom", r"(?:oom[-_]kill|Out of memory: Killed process)"),  # seen after "error:" or "Killed"
    _r("host.oom", ORG, "OOM", r"(?:OOM Killed|OOMKilled|OOM killer)"),
    _r("proc.crash", ORG, "ation fault", r"Segmentation fault"),
    _r("proc.crash", ORG, "Bus error", r"Bus error"),
    # torch's DataLoader worker signal handler (torch/csrc/DataLoader.cpp): "ERROR: Unexpected bus error encountered
    # in worker. This might be caused by insufficient shared memory (shm)."
    _r("proc.crash", ORG, "Unexpected bus error", r"Unexpected bus error encountered in worker"),
    # glibc's own aborts (debug/fortify_fail.c "*** %s ***: %s terminated"; malloc/malloc.c malloc_printerr): the
    # process found its memory corrupt and called abort(); the signal report after it is that abort's
    _r("proc.crash", ORG, "detected ***", r"\*\*\* (?P<what>(?:stack smashing|buffer overflow) detected) \*\*\*"),
    _r("proc.crash", ORG, "double free", r"(?P<what>double free or corruption)"),
    _r("proc.crash", ORG, "malloc.c:", r"(?P<what>malloc\.c:\d+: \w+: Assertion) `"),  # glibc's assert in its allocator
    # Open MPI's (opal/util/stacktrace.c) banner for a process's own fatal signal, "[%s:%05d] *** Process received
    # signal ***", before its "Signal: %s (%d)" line (which an excerpt may cut): a process died of a signal (its host and
    # pid in the prefix), maybe the abort() after an error of its own (causes/failures.py signalled)
    _r("proc.signal", S, "Process received signal", r"\*\*\* (?P<what>Process received signal) \*\*\*"),
    # libstdc++'s terminate handler (libsupc++/vterminate.cc __verbose_terminate_handler): "terminate called without an
    # active exception" (std::terminate with nothing thrown: a std::thread destroyed while joinable) or "terminate called
    # recursively", then abort(): the process's own crash, as its SIGABRT report below says
    _r(
        "proc.crash", ORG, "terminate called", r"(?P<what>terminate called (?:without an active exception|recursively))"
    ),
    _r(
        "proc.crash",
        ORG,
        "(): ",
        r"(?P<what>(?:free|realloc|munmap_chunk)\(\): invalid pointer|malloc\(\): memory corruption)",
    ),
    _r("proc.crash", ORG, "Fatal Python error", r"Fatal Python error: (?P<what>.*)"),
    # --- NCCL init and transport
    _r("nccl.duplicate_gpu", ORG, "Multiple Ranks are using the same GPU", r"Multiple Ranks are using the same GPU"),
    _r(
        "nccl.version_mismatch",
        ORG,
        "Mismatched NCCL version",
        r"rank (?P<a>\d+) version (?P<va>\d+) rank (?P<b>\d+) version (?P<vb>\d+)",
    ),
    _r(
        "nccl.no_interface",
        ORG,
        "interface",
        r"(?:no socket interface found|No usable listening interface found|NET/Socket : no interface found|"
        r"No IP interface found|No interface found in the same subnet|no NCCL_SOCKET_IFNAME interface found)",
    ),
    _r("nccl.no_interface", ORG, "Failed to initialize any NET plugin", r"Failed to initialize any NET plugin"),
    _r("nccl.no_interface", ORG, "Unable to find address for", r"Unable to find address for: ?(?P<iface>\S+)"),
    _r("nccl.dup_rank", ORG, "has already checked in", r"rank (?P<a>\d+) of (?P<n>\d+) ranks has already checked in"),
    _r("nccl.nranks_mismatch", ORG, "mismatch in info from procs", r"nranks (?P<a>\d+) vs (?P<b>\d+)"),
    _r("nccl.invalid_rank", ORG, "Invalid rank requested", r"Invalid rank requested : (?P<a>-?\d+)/(?P<n>\d+)"),
    _r(
        "nccl.ib_error",
        S,
        "Got completion from peer",
        r"Got completion from peer (?P<peer>\S+) with (?:status=|error )?(?P<status>\S+)",
    ),
    _r("nccl.peer_closed", S, "Connection closed by remote peer", r"Connection closed by remote peer (?P<peer>\S+)"),
    _r("nccl.connect_failed", S, "connect to", r"connect to (?P<peer>\S+) (?:returned|failed)"),
    _r(
        "nccl.error",
        S,
        "NCCL error in",
        r"NCCL error in: (?P<where>[^,]+), (?P<what>.*?)(?:, NCCL version (?P<version>[\d.]+\S*))?$",
    ),
    # torch_npu's ProcessGroupHCCL (HCCL_CHECK_ERROR): "HCCL error in: {file}:{line}" alone, its reason (a CANN error
    # code and message) on the lines after: the collective library's failure, whose words follow
    _r("nccl.error", S, "HCCL error in: ", r"\bHCCL error in: (?P<where>\S+?:\d+)\s*$"),
    _r("nccl.error", S, "NCCL error", r"NCCL error: (?P<what>.*)"),
    # torch/csrc/cuda/nccl.cpp throw_nccl_error (torch.cuda.nccl, DataParallel's broadcast and reduce): "NCCL Error "
    # << status << ": " << ncclGetErrorString(status)
    _r("nccl.error", S, "NCCL Error ", r"\bNCCL Error \d+: (?P<what>.+)"),
    _r(
        "nccl.result",
        S,
        "nccl",
        r"^(?P<what>nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)): ",
    ),
    # --- watchdog wrappers (after the CUDA rules: an inner CUDA error wins)
    _r(
        "coll.watchdog_exception",
        S,
        "watchdog thread terminated with exception",
        r"terminated with exception: (?P<what>.*)",
    ),
    _r("coll.async_error", S, "raised the following async exception", r"raised the following async exception"),
    _r("coll.aborted", S, "communicator was aborted", r"communicator was aborted on rank (?P<rank>\d+)"),
    # --- store / rendezvous
    _r(
        "rdzv.clients_joined",
        S,
        "clients joined",
        r"Timed out after (?P<s>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<expected>\d+) clients joined",
    ),
    _r("rdzv.wait_keys", S, "wait timeout after", r"wait timeout after (?P<ms>\d+)ms, keys: (?P<keys>.*)"),
    _r(
        "rdzv.connect_timeout",
        S,
        "timed out after",
        r"client socket has timed out after (?P<t>\S+) while trying to connect to \((?P<host>[^,\s]+)(?:, (?P<port>\d+)\))?",
    ),
    # c10d TCPStore.cpp TCPStore::TCPStore's connect loop: C10D_ERROR("TCP client failed to connect/validate to host
    # {}:{} - timed out (try={}, timeout={}ms): {}") once its deadline passed, and C10D_WARNING("... - retrying (try={},
    # timeout={}ms, delay={}ms): {}") for every try before it (the try's own error last: a refusal, a reset, a try's
    # timeout): only the first is a timeout; a retry line is one failed try, as socket.cpp's "has failed to connect to"
    _r(
        "rdzv.connect_timeout",
        S,
        "failed to connect/validate",
        r"failed to connect/validate to host (?P<host>\S+?):(?P<port>\d+) - timed out\b",
    ),
    _r(
        "rdzv.connect_failed",
        S,
        "failed to connect/validate",
        r"failed to connect/validate to host (?P<host>\S+?):(?P<port>\d+)\b",
    ),
    # the "init_distributed_mode" helper torchvision's references, DETR, DeiT, MAE and many more copy:
    # print("| distributed init (rank {}): {}".format(args.rank, args.dist_url)): one a process (rank_of_file)
    _r("launch.init_rank", F, "distributed init (rank", r"distributed init \(rank (?P<init_rank>\d+)\)"),
    _r("rdzv.store_endpoint", F, "waitForInput", r"remote=\[?(?P<host>[^\]\s]*?)\]?:(?P<port>\d+)\)"),
    _r("rdzv.timeout", S, "RendezvousTimeoutError", r"RendezvousTimeoutError"),
    _r("rdzv.conn_error", S, "RendezvousConnectionError", r"RendezvousConnectionError"),
    _r("rdzv.closed", S, "Rendezvous", r"Rendezvous(?:Closed|GracefulExit)Error"),
    _r("rdzv.store_closed", S, "Connection was likely closed", r"Failed to (?:recv|send), (?:got|sent) 0 bytes"),
    _r("rdzv.env_missing", ORG, "expected, but not set", r"environment variable (?P<var>\w+) expected, but not set"),
    # --- sockets
    _r("net.addr_in_use", ORG, "EADDRINUSE", r"port: (?P<port>\d+)"),
    _r("net.addr_in_use", ORG, "ddress already in use", r"(?:\[[^\]]*\]:(?P<port>\d+))?.*?ddress already in use"),
    _r("gloo.peer_closed", S, "closed by peer", r"Connection closed by peer \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+)"),
    _r(
        "gloo.peer_closed",
        S,
        "Connection reset by peer",
        r"(?:Read error \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+): )?Connection reset by peer",
    ),
    _r("gloo.connect_mesh", S, "connectFullMesh failed", r"connectFullMesh failed"),
    _r("net.conn_refused", S, "onnection refused", r"onnection refused"),
    # --- launcher and scheduler
    _r(
        "agent.child_failed",
        M,
        "failed (exitcode",
        # rich's log handler wraps the line and right-aligns its source ("(pid:      api.py:672" then "2255697) of ...")
        r"failed \(exitcode: (?P<exit>-?\d+)\) local_rank: (?P<local>\d+) \(pid:(?: (?P<pid>\d+)\))?",
    ),
    _r("agent.child_failed", M, "exits with return code", r"exits with return code = (?P<exit>-?\d+)"),
    _r("agent.death_signal", ORG, "death signal", r"Received (?P<sig>\d+) death signal"),
    _r("agent.death_signal", ORG, "SignalException", r"Process (?P<pid>\d+) got signal: (?P<sig>\d+)"),
    _r(
        "slurm.cancelled",
        ORG,
        "CANCELLED AT",
        r"(?:JOB|STEP) (?P<step>\S+) ON (?P<host>\S+) CANCELLED AT (?P<at>\S+)(?: DUE TO (?P<why>[A-Z ]+))?",
    ),
    _r(
        "slurm.task_failed",
        M,
        "srun: error:",
        r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.*)",
    ),
    _r("rdzv.dump_written", F, "debug info to", r"(?:Flight Recorder|NCCLPG) debug info to (?P<path>\S+)"),
    # the env:// contract (torch/distributed/rendezvous.py _env_rendezvous_handler reads RANK, WORLD_SIZE) as a shell
    # line sets or prints it: "export RANK=1", "WORLD_SIZE=1" alone on a line (after a prompt)
    _r("launch.env", F, "RANK=", r"^\W*(?:export\s+)?(?P<var>RANK)=(?P<value>\d+)\s*$"),
    _r("launch.env", F, "WORLD_SIZE=", r"^\W*(?:export\s+)?(?P<var>WORLD_SIZE)=(?P<value>\d+)\s*$"),
)

# torch exception classes that report a failure elsewhere: a symptom, not a cause
COMM_EXCEPTIONS = frozenset(
    {
        "DistBackendError",
        "DistNetworkError",
        "DistStoreError",
        "DistError",
        "ChildFailedError",
        "SignalException",
        "RendezvousTimeoutError",
        "RendezvousConnectionError",
        "RendezvousClosedError",
        "RendezvousGracefulExitError",
        "RendezvousStateError",
        "RendezvousError",
    }
)
_EXC = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<cls>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure))(?::\s?(?P<msg>.*))?$"
)
# an exception whose message reports a communication symptom (a wait that ran out, a peer that went
# away) is a victim's, whatever its class
_COMM_MSG = re.compile(
    r"(?i:timed out|timeout)|Connection (?:reset|closed)|Socket closed|Broken pipe|closed by (?:remote )?peer"
    r"|communicator was aborted"
    # horovod/common/operations.cc SHUT_DOWN_ERROR: "Horovod has been shut down. This was caused by an exception on
    # one of the ranks or an attempt to allreduce ... after one of the ranks finished execution": a victim's words
    r"|Horovod has been shut down"
)
_RAISE = re.compile(r"raise [A-Za-z_][\w.]*\(")
_TRAIL = re.compile(r"NCCL INFO [\w./-]+\.\w+:\d+ -> ([2-6])\b")  # 2 system .. 6 remote (families.RETCODE)
_RETRY = re.compile(r"NCCL INFO Call to connect returned (Connection timed out), retrying")
_C10_CHECK = re.compile(r"Exception raised from c10_(cuda|hip)_check_implementation\b")
_ELASTIC = re.compile(r'/torch/distributed/elastic/|/bin/torchrun"')
_NOISE = ('File "', "Exception raised from", "frame #", "During handling", "The above exception", "warnings.warn")


def classify(text: str) -> tuple[str, Role, dict[str, Any]] | None:
    """The event in one message, or None for a line that reports nothing."""
    # a traceback frame is noise unless a paste flattened more lines into it; NCCL INFO is retries and
    # chatter, but for the trail of a failed call's result (NCCL checks.h: INFO("%s:%d -> %d", __FILE__,
    # __LINE__, res)), which some failures leave without any WARN (a bootstrap connect in 2.18)
    if text.startswith("NCCL INFO"):
        if trail := _TRAIL.match(text):
            return "nccl.result", Role.SYMPTOM, {"retcode": trail.group(1)}
        # but for a connect that times out (include/socket.h <= 2.11 connectAddress: INFO(NCCL_ALL,"Call to connect
        # returned %s, retrying", strerror(errno)) while ETIMEDOUT repeats, then WARN("Connect to %s failed : %s") and
        # ncclSystemError): no answer from the peer's address at all. A refused connect retried is a peer not listening
        # yet, the chatter of every start-up
        if retry := _RETRY.match(text):
            return "nccl.connect_retry", Role.SYMPTOM, {"why": retry.group(1)}
        return None
    # c10's CUDA/HIP check (CUDAException.cpp, hipified HIPException.cpp) is where every "CUDA error: ..." / "HIP error:
    # ..." is raised: its frame line is a CUDA-class failure even where an excerpt lost the header above it
    if text.startswith("Exception raised from c10_") and (m := _C10_CHECK.match(text)):
        return "cuda.error", Role.ORIGIN, {"what": f"{m.group(1)} check failed"}
    if text.startswith("raise ") and _RAISE.match(text):  # a traceback's source line (its header cut by an excerpt)
        return None
    if text.startswith(_NOISE) and len(text) < 300:
        # but a frame of torchrun's own code (its agent, its rendezvous) says whose the job's store is: the agent's
        return ("launch.elastic", Role.FACT, {}) if text.startswith('File "') and _ELASTIC.search(text) else None
    for rule in RULES:
        if rule.guard in text and (m := rule.pattern.search(text)):
            data: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
            if "reporter" in data:  # the rank that printed it (store barrier, monitored barrier peers)
                data["msg_rank"] = int(data["reporter"])
            elif str(data.get("tasks", "")).isdecimal():  # srun's one task id (SLURM_PROCID): the rank it names
                data["msg_rank"] = int(data["tasks"])
            enrich(rule.kind, text, data)
            if rule.kind == "agent.spawn_signal":  # mp.spawn: the signal's exit code, as torchrun reports it
                sig = getattr(signal, str(data["sig"]), None)
                return "agent.child_failed", rule.role, {**data, "exit": str(-int(sig)) if sig else "-1"}
            return rule.kind, rule.role, data
    if m := _EXC.match(text):
        cls = m.group("cls")
        data = {"cls": cls, "msg": (m.group("msg") or "").strip()}
        if cls in COMM_EXCEPTIONS or cls in ("SystemExit", "KeyboardInterrupt") or _COMM_MSG.search(data["msg"]):
            return "py.comm_exception", Role.SYMPTOM, data
        if m.group("msg") is not None and not data["msg"]:
            # "SomeError:" and nothing after it: its message follows on lines of their own (PaddlePaddle's error
            # summary, "ResourceExhaustedError:" then a blank line and "Out of memory error on GPU 0. ..."), which say
            # what failed; the bare class says nothing of its own
            return "misc.error", Role.SYMPTOM, data
        if cls == "ProcessRaisedException":
            # torch/multiprocessing/spawn.py: the parent re-raises a child's error, "-- Process %d terminated with the
            # following error:" and the child's own traceback below it: that error is the failure, not this wrapper
            return "misc.error", Role.SYMPTOM, data
        return "py.exception", Role.ORIGIN, data
    if "NCCL WARN" in text:
        return "nccl.warn", Role.SYMPTOM, {"what": text.split("NCCL WARN", 1)[1].strip()}
    if UNKNOWN_ERROR.search(text) and not any(n in text for n in NOT_AN_ERROR):
        return "misc.error", Role.SYMPTOM, {}
    return None


def ranks_list(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


# older releases print the abbreviated form without commas: CollectiveFingerPrint(SequenceNumber=1OpType=BARRIER)
_FP_FIELD = re.compile(r"(SequenceNumber|OpType|TensorShape|TensorDtypes)=(\[[^\]]*\]|\d+(?=[A-Z,)])|[^,)]*)")


def fingerprint(text: str) -> str:
    """``CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[1], ...)`` ->
    ``ALLGATHER shape=[1] dtype=Float`` (what DETAIL compares, minus device options)."""
    fields: dict[str, str] = dict(_FP_FIELD.findall(text))
    out = str(fields.get("OpType", "?"))
    if "TensorShape" in fields:
        out += f" shape={fields['TensorShape']}"
    if "TensorDtypes" in fields:
        out += f" dtype={fields['TensorDtypes']}"
    return out


def fingerprint_seq(text: str) -> int | None:
    m = re.search(r"SequenceNumber=(\d+)", text)
    return int(m.group(1)) if m else None
