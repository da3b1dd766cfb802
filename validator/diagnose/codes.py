"""COL (collectives) and DGN (diagnose) finding codes. A diagnose finding carries the code's
``hint`` (unless the cause names a fix that fits the run better) and its ``verify`` command."""

from __future__ import annotations

from validator.codes import Code, code, table
from validator.model import Severity

REHEARSE = (
    "validator rehearse --max-seconds 120 -- torchrun --nproc-per-node=4 train.py ARGS (must report no divergence)"
)
PREFLIGHT = "validator preflight -- YOUR_LAUNCH_COMMAND on every node (every rank arrives, no RDZ/RNK/NET finding)"


collateral = code(
    "DGN020",
    Severity.INFO,
    "Collateral failures",
    """Ranks that failed as a consequence of the initiating failure: timeouts, closed
    connections, SIGTERM from the launcher.

    These lines dominate the logs of a failed job (hundreds of ranks print watchdog
    timeouts); listing them separately keeps the cause in view.

    Nothing to fix on these ranks; fix the initiating failure.""",
    hint="",
    verify="",
)

incomplete = code(
    "DGN021",
    Severity.WARNING,
    "Diagnosis inputs incomplete",
    """Some evidence was missing: dumps or traces from some ranks, ranks with no log, files
    that could not be read fully.

    A verdict from part of the job can miss the rank that caused the failure, especially when
    that rank is the silent one.

    Collect the logs (and Flight Recorder dumps) of every rank, including the nodes that
    died, and diagnose them together.""",
    hint="collect logs and dumps from every rank",
    verify="validator diagnose ALL_LOGS ALL_DUMPS (no DGN021)",
)


CODES: dict[str, Code] = table(
    code(
        "COL001",
        Severity.ERROR,
        "Mismatched collective",
        """A rank called a different collective (type, shape, dtype or root) than the majority of its
        process group at the same position, or called one the others did not.

        Collectives are matched by order, not by name: when one rank calls all_gather while the
        others call all_reduce, or passes a tensor of another shape, the group hangs until the
        timeout (gloo: "Timed out waiting ...ms for recv operation"; NCCL: the watchdog) or, with
        TORCH_DISTRIBUTED_DEBUG=DETAIL, fails at once with "Detected mismatch between collectives".
        Every rank then reports a timeout; only the order of calls shows which one diverged.

        Make every rank issue the same collectives in the same order with the same shapes and
        dtypes: move rank-dependent branches out of the collective path, pad uneven batches, and
        compare the call site named in the finding with the majority's.""",
        hint="make the named rank call the same collective (type, shape, dtype) at the named call site as the others",
        verify=REHEARSE,
    ),
    code(
        "COL002",
        Severity.ERROR,
        "Rank skipped or never reached a collective",
        """One or more ranks never joined a collective that the rest of its process group entered:
        they skipped it (a rank-dependent branch), stopped before it (an exception, a hang in data
        loading), or are lagging according to the desync report, monitored barrier or Flight
        Recorder.

        The ranks that did join wait in the collective until the timeout and print watchdog or
        gloo timeouts; those lines name the victims, not the cause. The rank that is missing is
        often silent.

        Look at the named rank at the named call site: a condition that depends on the rank or its
        data (an empty batch, an early `return`, a `continue` in the step loop), an exception
        caught and swallowed, or work that takes longer on that rank than the timeout.""",
        hint="make the named rank reach the same collective as the others (no rank-dependent branch around it)",
        verify=REHEARSE,
    ),
    code(
        "COL003",
        Severity.ERROR,
        "Collective timed out, initiating rank unknown",
        """Ranks reported collective timeouts (NCCL watchdog, gloo recv/send timeouts, blocking
        wait) and nothing in the inputs shows which rank caused them.

        Every rank of a hung collective prints the same timeout, so the logs alone often cannot
        name the culprit: the evidence that could (Flight Recorder dumps, a desync report, a
        rehearsal trace, DETAIL fingerprints) was not among the inputs.

        Rerun with TORCH_FR_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 (NCCL) or
        TORCH_DISTRIBUTED_DEBUG=DETAIL (a short rehearsal), or rehearse the first steps with
        `validator rehearse`, and diagnose the new logs together with the dumps or traces.""",
        hint="collect Flight Recorder dumps (TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1) or a rehearsal trace",
        verify="validator diagnose LOGS DUMPS (names an initiating rank)",
    ),
    code(
        "COL004",
        Severity.ERROR,
        "Unmatched point-to-point",
        """A send has no matching receive (or the shapes differ) between two ranks in a rehearsal
        trace.

        Point-to-point operations pair by order between each (sender, receiver) pair; a missing or
        extra send or recv hangs both ranks, and a shape mismatch corrupts or fails the transfer.

        Make every send to a peer match a recv from it, in the same order and with the same
        shape; pipeline schedules are the usual place to look.""",
        hint="pair every send with a recv of the same shape, in the same order, on the peer",
        verify=REHEARSE,
    ),
    code(
        "DGN001",
        Severity.ERROR,
        "Ranks never joined the rendezvous",
        """The TCPStore or the torchrun rendezvous timed out waiting for ranks or nodes that never
        arrived (`X/Y clients joined`, `wait timeout ... keys: /default_pg/0//cpu//0/N`, a bare
        RendezvousTimeoutError).

        A rank or node that never starts, or starts with another world size, master port or
        rendezvous id, leaves the others waiting until the rendezvous timeout (default 900 s for
        static, 600 s for c10d). The last number of a store key is the rank that never wrote its
        address.

        Check that every node was started with the same --nnodes, --master-addr/--master-port
        or --rdzv-endpoint and --rdzv-id, that the missing node is up and its log shows the
        launch; compare with the healthy ranks.""",
        hint="start the missing ranks/nodes with the same --nnodes, master address/port and rendezvous id as the others",
        verify=PREFLIGHT,
    ),
    code(
        "DGN002",
        Severity.ERROR,
        "Rank cannot reach the rendezvous store",
        """A rank timed out connecting to MASTER_ADDR:MASTER_PORT (or the c10d rendezvous
        endpoint), often at an address or port that differs from the one the other ranks used.

        Nothing listens where it connects (a different port or host, a firewall, the master not
        up yet or already gone), so it retries until the timeout and the rest of the job waits
        for it.

        Give every rank the same MASTER_ADDR/MASTER_PORT (or --rdzv-endpoint), reachable from
        every node; check firewalls and that the master node starts first.""",
        hint="use the same reachable MASTER_ADDR:MASTER_PORT on every rank",
        verify=PREFLIGHT,
    ),
    code(
        "DGN003",
        Severity.ERROR,
        "Port already in use",
        """The store (or NCCL) could not bind its port: EADDRINUSE / Address already in use.

        Another job, a leftover process of a previous run or two ranks claiming rank 0 hold
        MASTER_PORT on the master, so the store never starts and every rank times out.

        Pick a free MASTER_PORT per job, kill leftover processes, and make sure only one process
        is rank 0.""",
        hint="choose a free MASTER_PORT for this job and stop leftover processes holding it",
        verify="validator probe on the master node shows MASTER_PORT free (RDZ006 silent in validator check)",
    ),
    code(
        "DGN004",
        Severity.ERROR,
        "Two ranks on one GPU",
        """NCCL found two ranks on the same GPU ("Duplicate GPU detected : rank A and rank B both
        on CUDA device X", or "Multiple Ranks are using the same GPU" in newer NCCL).

        NCCL refuses a communicator with two ranks on one device (invalid usage), so every rank
        fails at its first collective.

        Call torch.cuda.set_device(LOCAL_RANK) (or pass device_id to init_process_group) before
        any CUDA work, and check CUDA_VISIBLE_DEVICES and --nproc-per-node against the GPUs on
        each node.""",
        hint="torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init; one rank per GPU per node",
        verify="validator check FACTS (GPU002 silent) or " + PREFLIGHT,
    ),
    code(
        "DGN005",
        Severity.ERROR,
        "No usable network interface",
        """NCCL or Gloo found no network interface to use ("Bootstrap : no socket interface
        found", "NET/Socket : no interface found", "Unable to find address for: eth9").

        NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME name an interface that does not exist (or is down)
        on this node, so the communicator cannot bootstrap.

        Set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to an interface present and up on every node
        (prefixes such as `^docker,lo` for NCCL), or unset them.""",
        hint="set NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to an interface that exists and is up on every node",
        verify="validator check FACTS (NET001/NET002/NET005 silent) or " + PREFLIGHT,
    ),
    code(
        "DGN006",
        Severity.ERROR,
        "NCCL version differs across ranks",
        """NCCL reported ranks with different NCCL versions ("Mismatched NCCL version detected").

        Ranks with different NCCL libraries cannot form a communicator; mixed container images or
        a stray libnccl on LD_LIBRARY_PATH on some nodes cause it.

        Use one image / one torch build everywhere; check LD_LIBRARY_PATH and NCCL_* library
        overrides on the odd nodes.""",
        hint="run the same torch/NCCL build on every node",
        verify="validator check FACTS (SW002 silent)",
    ),
    code(
        "DGN007",
        Severity.ERROR,
        "NCCL or network error",
        """NCCL failed with a system, internal, remote or network error (socket connect failures,
        closed connections, InfiniBand completion errors), without a clearer cause elsewhere.

        Remote errors usually mean a peer process died first: look for the rank whose log shows
        an exception or that disappeared. Errors on a few hosts only point to their NICs or
        links.

        Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; check the named hosts' links and
        the peer named in the error; check for a rank that crashed first.""",
        hint="check the network of the named hosts and the peer that closed the connection",
        verify="rerun with NCCL_DEBUG=INFO and validator diagnose the logs (no DGN007)",
    ),
    code(
        "DGN008",
        Severity.ERROR,
        "CUDA error on a rank",
        """A rank hit a CUDA error (illegal memory access, device-side assert, ECC error, launch
        failure); NCCL and the watchdog on the other ranks report it as communication failures.

        CUDA errors are sticky and asynchronous: the failing rank's communicator dies and the
        others time out or lose the connection, so most of the job's log blames NCCL.

        Reproduce on the named rank with CUDA_LAUNCH_BLOCKING=1 to get the real stack; for ECC
        or Xid errors drain the GPU/host.""",
        hint="debug the CUDA error on the named rank (CUDA_LAUNCH_BLOCKING=1); drain the GPU on ECC/Xid errors",
        verify="rerun the failing step with CUDA_LAUNCH_BLOCKING=1 on the named host",
    ),
    code(
        "DGN009",
        Severity.ERROR,
        "Out of memory",
        """A rank ran out of GPU memory (CUDA out of memory) or host memory (OOM killer, SIGKILL
        with an oom_kill event).

        The rank dies; the others block in their next collective and time out.

        Reduce the batch size or sequence length on that rank, balance data across ranks, enable
        activation checkpointing, or give the job more host memory.""",
        hint="reduce memory use on the named rank (batch size, sequence length, checkpointing)",
        verify="rerun and watch torch.cuda.max_memory_allocated() / the node's memory on the named rank",
    ),
    code(
        "DGN010",
        Severity.ERROR,
        "A rank raised an exception",
        """A rank raised a Python exception (not a communication error) before the others failed.

        The rank exits; the rest of the job waits in its next collective and fails with
        timeouts or closed connections, which fill the logs.

        Fix the exception at the call site named in the finding; the collateral errors go away
        with it.""",
        hint="fix the exception at the named call site",
        verify=REHEARSE,
    ),
    code(
        "DGN011",
        Severity.ERROR,
        "A rank was killed by a signal",
        """A worker process died from a signal (SIGKILL, SIGSEGV, SIGBUS, ...) rather than an
        exception.

        SIGKILL without an exception is most often the kernel's OOM killer or the scheduler;
        SIGSEGV/SIGBUS point to native code or bad hardware. SIGTERM and SIGABRT in the other
        ranks are usually the launcher tearing them down afterwards.

        Check `dmesg` / the scheduler's records for OOM kills on the named host, and core dumps
        for segmentation faults.""",
        hint="check the named host for OOM kills (dmesg, sacct, kubectl describe) or core dumps",
        verify="dmesg -T | grep -i -E 'killed process|oom' on the named host",
    ),
    code(
        "DGN012",
        Severity.ERROR,
        "Launch configuration error",
        """The launch contract is broken: an env:// variable is missing, NCCL saw an invalid or
        duplicate rank, or ranks disagree on the number of ranks.

        Each process must know its RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, with every
        rank 0..WORLD_SIZE-1 exactly once.

        Launch with torchrun or map the scheduler's variables (SLURM_PROCID, SLURM_NTASKS, ...)
        to RANK/WORLD_SIZE consistently on every node.""",
        hint="set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT consistently on every rank (or use torchrun)",
        verify=PREFLIGHT,
    ),
    code(
        "DGN013",
        Severity.ERROR,
        "Unrecognised failure",
        """The logs report errors that match none of the failure families diagnose knows; the
        finding quotes the first error lines of each rank, in time order, so the likely cause is
        still in view.

        Diagnose recognises failures by the message families that NCCL, PyTorch (c10d, elastic)
        and gloo print (docs/diagnose.md lists them). A message from another library, a new
        release that rewords a message, or a log cut before the decisive line falls through to
        this finding; no rank is named from it.

        Read the quoted lines first. To get a rule added, share the log: run
        `validator diagnose LOGS -f json --output diag.json`, keep the logs of every rank (with
        NCCL_DEBUG=WARN or INFO if you can rerun), redact host names if needed without editing the
        error lines, and attach both to an issue with the command you launched.""",
        hint="read the quoted first error lines per rank; share the log (see `validator explain DGN013`) for a new rule",
        verify="validator diagnose LOGS (names a known failure class)",
    ),
    code(
        "DGN014",
        Severity.ERROR,
        "Job stopped from outside",
        """The scheduler or an outer timeout stopped the job (Slurm CANCELLED / TIME LIMIT, the
        launcher receiving a death signal).

        Nothing in the ranks failed first; the job ran out of time or was cancelled, possibly
        while hanging.

        Check the scheduler's reason (sacct, kubectl describe). If the job was hanging, rerun
        with Flight Recorder dumps to see where.""",
        hint="check why the scheduler stopped the job; if it hung, collect Flight Recorder dumps",
        verify="sacct -j JOBID --format=JobID,State,Elapsed,Timelimit",
    ),
    collateral,
    incomplete,
)

CLASS: dict[str, str] = {
    "COL001": "mismatched collective",
    "COL002": "rank missing from a collective",
    "COL003": "collective timeout",
    "COL004": "unmatched point-to-point",
    "DGN001": "rendezvous timeout (ranks never joined)",
    "DGN002": "store unreachable",
    "DGN003": "address in use",
    "DGN004": "NCCL init: duplicate GPU",
    "DGN005": "no usable network interface",
    "DGN006": "NCCL version mismatch",
    "DGN007": "NCCL / network error",
    "DGN008": "CUDA error",
    "DGN009": "out of memory",
    "DGN010": "exception on a rank",
    "DGN011": "killed by a signal",
    "DGN012": "launch configuration error",
    "DGN013": "unrecognised failure",
    "DGN014": "stopped from outside",
}

# The failure class each code reports in the fixed 14-class vocabulary of the real-log corpus
# (tests/corpus/diagnose/README.md); a cause may name a finer one (``Cause.family``): COL002
# from a store barrier is ``missing_rank``, DGN007 from a refused connect ``connection_refused``.
VOCAB: dict[str, str] = {
    "COL001": "collective_mismatch",
    "COL002": "collective_timeout",
    "COL003": "collective_timeout",
    "COL004": "collective_mismatch",
    "DGN001": "rendezvous_timeout",
    "DGN002": "rendezvous_timeout",
    "DGN003": "address_in_use",
    "DGN004": "nccl_init_duplicate_gpu",
    "DGN005": "nccl_init_no_interface",
    "DGN006": "nccl_version_mismatch",
    "DGN007": "nccl_remote_error",
    "DGN008": "cuda_error",
    "DGN009": "oom",
    "DGN010": "child_failed_other",
    "DGN011": "child_failed_other",
    "DGN012": "child_failed_other",
    "DGN013": "unrecognised",
    "DGN014": "child_failed_other",
}
