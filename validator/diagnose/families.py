"""Message families derived from the format strings of NCCL, gloo and PyTorch c10d/elastic.

Each rule follows one ``WARN(...)`` / ``GLOO_ERROR_MSG`` / ``TORCH_CHECK`` / Python ``raise``
format string (cited next to it), with the ``%s``/``%d`` fields as named groups, so every
message the source can print in that family matches, not one sample of it. They are tried
before the older rules in ``classify.RULES`` (first match wins).

``NCCL_CLASS`` maps what NCCL says about an error to its ``ncclResult_t``: 2 system, 3
internal, 5 invalid usage, 6 remote (``src/include/nccl.h``, ``ncclGetErrorString`` in
``src/misc/utils.cc``, PyTorch's ``getNcclErrorDetailStr`` in ``NCCLUtils.cpp``).
"""

from __future__ import annotations

import re

from validator.diagnose.events import Role

ORG, S = Role.ORIGIN, Role.SYMPTOM

# (kind, role, guard, pattern); see classify.Rule
FAMILIES: tuple[tuple[str, Role, str, str], ...] = (
    # EADDRINUSE wherever it surfaces first: c10d TCPStore ("[errno: 98 - Address already in use]"), NCCL
    # checks.h SYSCHECK "Call to bind failed : Address already in use", gloo "bind: Address already in use"
    ("net.addr_in_use", ORG, "EADDRINUSE", r"port: (?P<port>\d+)"),
    ("net.addr_in_use", ORG, "ddress already in use", r"(?:\[[^\]]*\]:(?P<port>\d+))?.*?ddress already in use"),
    # NCCL src/init.cc: WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx"), also bare as
    # PyTorch's "Last error:" text
    (
        "nccl.duplicate_gpu",
        ORG,
        "Duplicate GPU detected",
        r"rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<dev>\w+)",
    ),
    # NCCL src/init.cc (2.4-2.7): WARN("Mismatched collective detected, please check your collective
    # calls at and around rank %d. ..."). A pointer into the ring, not the initiator.
    (
        "nccl.mismatch_around",
        ORG,
        "Mismatched collective",
        r"Mismatched collective detected.*?around rank (?P<around>\d+)",
    ),
    # NCCL src/transport/net_ib.cc: the two ends of a transfer disagree on its size (invalid usage, code 5).
    # 2.4-2.9: WARN("NET/IB : collective mismatch error local size %d remote %d addr %lx rkey %x seq %x/%x");
    # 2.11: "NET/IB : peer %s collective mismatch error local size %d remote %d addr ..."; 2.13-2.19:
    # "NET/IB : req %d/%d tag %x peer %s collective mismatch error, local size %d remote size %d"
    (
        "nccl.size_mismatch",
        ORG,
        "collective mismatch error",
        r"(?:peer (?P<peer>\S+?)(?:<\d+>)? )?collective mismatch error,? local size (?P<local>\d+) remote(?: size)? "
        r"(?P<remote>\d+)",
    ),
    # NCCL src/transport/net_socket.cc, the same over sockets (the received size is the sender's): up to 2.11
    # WARN("NET/Socket : message truncated : receiving %d bytes instead of %d", data, r->size); from 2.12
    # "NET/Socket : peer %s message truncated : receiving %d bytes instead of %d. If you believe ..." (the sizes on a
    # line of their own where a paste wrapped it)
    (
        "nccl.size_mismatch",
        ORG,
        "message truncated",
        r"NET/Socket : (?:peer (?P<peer>\S+?)(?:<\d+>)? )?message truncated(?: : receiving (?P<remote>\d+) bytes "
        r"instead of (?P<local>\d+)| ?:?\s*$)",
    ),
    # MPICH's error stack (src/mpid/ch3 MPIDI_CH3U_Request_unpack_uebuf, ...) and MS-MPI: "Message truncated; %d bytes
    # received but buffer size is %d", "Message from rank %d and tag %d truncated; %d bytes received but buffer size is
    # %d" (MPI_ERR_TRUNCATE): a receive posted for less than its sender sent, the two ends disagree on the collective
    (
        "nccl.size_mismatch",
        ORG,
        "bytes received but buffer size",
        r"\btruncated; (?P<remote>\d+) bytes received but buffer size is (?P<local>\d+)",
    ),
    # NCCL src/bootstrap.cc bootstrapNetRecv (2.x): WARN("Message truncated : received %d bytes instead of %d",
    # recvSize, size) (ncclInternalError): a bootstrap message of another size than the receiver expects, the two
    # ends disagree on what they exchange (the point-to-point or collective setup they issue)
    (
        "nccl.size_mismatch",
        ORG,
        "Message truncated",
        r"Message truncated : received (?P<remote>\d+) bytes instead of (?P<local>\d+)",
    ),
    # gloo transport/tcp/pair.cc (pytorch/gloo), reading a message into a posted buffer: GLOO_ENFORCE_LE(
    # op.preamble.length, op.nbytes) -> "[enforce fail at .../pair.cc:446] op.preamble.length <= op.nbytes. 1046204 vs
    # 1040256": the peer sent more than this side posted, the two ends of one transfer disagree on its size
    (
        "nccl.size_mismatch",
        ORG,
        "enforce fail at",
        r"enforce fail at \S*pair\.cc:\d+\] (?P<gloo>)op\.preamble\.length <= op\.nbytes\. (?P<remote>\d+) vs (?P<local>\d+)",
    ),
    # NCCL src/proxy.cc: WARN("[Proxy Service %d] Failed to execute operation %s from rank %d, retcode %d");
    # "from rank" is the communicator rank that asked, a victim
    (
        "nccl.proxy_failed",
        S,
        "Failed to execute operation",
        r"Failed to execute operation (?P<op>\w+) from rank (?P<from>\d+), retcode (?P<retcode>\d+)",
    ),
    # src/proxy.cc: "[Service thread] Error encountered progressing operation=%s, res=%d, closing connection"
    (
        "nccl.proxy_failed",
        S,
        "Error encountered progressing",
        r"progressing operation=(?P<op>\w+), res=(?P<retcode>\d+)",
    ),
    # src/proxy.cc: "[Service thread] Could not receive type from localRank %d, res=%u, closed=%d"
    (
        "nccl.proxy_closed",
        S,
        "Could not receive type from localRank",
        r"localRank (?P<local>\d+), res=(?P<retcode>\d+)",
    ),
    # src/misc/socket.cc: "socketProgress: Connection closed by remote peer %s"; "Net : Connection closed by remote peer";
    # NCCL 2.0-2.2 (include/socket.h socketReceive): "WARN Connection closed by remote peer", no peer named
    (
        "nccl.peer_closed",
        S,
        "Connection closed by remote peer",
        r"Connection closed by remote peer(?: (?P<peer>\S+?)(?:<(?P<port>\d+)>)?)?$",
    ),
    # src/misc/socket.cc ncclSocketProgressOpt: "Call to %s %s failed : %s" ("recv from" | "send to")
    (
        "nccl.peer_io",
        S,
        "Call to ",
        r"Call to (?:recv from|send to) (?P<peer>\S+?)(?:<(?P<port>\d+)>)? failed ?: ?(?P<why>.*)",
    ),
    # src/misc/socket.cc: "%s: connect to %s returned %s, exceeded error retry count after %d attempts",
    # "%s: connect to %s failed : %s", "ncclOsSocketPollConnect to %s failed with error %s";
    # include/socket.h (<= 2.10): "Connect to %s failed : %s"; bootstrap: return code 2 (system)
    (
        "nccl.connect_failed",
        S,
        "onnect to",
        r"[Cc]onnect to (?P<peer>\S+?)(?:<(?P<port>\d+)>)? (?:returned (?P<ret>[^,]+)|failed(?: with error)? ?:? ?(?P<why>[^,]*))",
    ),
    # NCCL 2.21+ src/misc/socket.cc socketPollConnect: WARN("socketPollConnect: connect returned %s, exceeded error retry
    # count (%d)", strerror(errno), RETRY_REFUSED_TIMES), returning ncclRemoteError although it never connected
    (
        "nccl.connect_failed",
        S,
        "connect returned",
        r"socketPollConnect: connect returned (?P<ret>[^,]+), exceeded error retry count",
    ),
    # include/socket.h (2.3-2.6) connectAddress, once its retries of a refused connect ran out: WARN("Call to connect
    # timeout : %s", strerror(errno)); bootstrap then returns 2 (system)
    ("nccl.connect_failed", S, "Call to connect timeout", r"Call to connect timeout ?: ?(?P<why>.*)"),
    # src/misc/socket.cc: "ncclOsSocketTryAccept: Accept failed: %s" (older "socketTryAccept: Accept failed: %s")
    ("nccl.connect_failed", S, "Accept failed", r"[Aa]ccept failed ?: ?(?P<why>.*)"),
    # src/transport/net_ib (p2p.cc, common.cc): "NET/IB : Got completion from peer %s with status=%d opcode=%d
    # len=%u vendor err %u (%s)" (older: "with error %d, opcode %d, len %d, vendor err %d"); code 6
    (
        "nccl.ib_error",
        S,
        "Got completion from peer",
        r"Got completion from peer (?P<peer>\S+?)(?:<(?P<port>\d+)>)? with (?:status=|error )(?P<status>\d+)",
    ),
    # vendor IB net plugins print NCCL's completion error under their own tag: HPC-X's nccl-rdma-sharp-plugins
    # (src/ib_plugin.c: "NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d", read
    # above) and plugins tagged "NET/IBP:" without NCCL's " : " ("NET/IBP:Got completion from peer %s with status=%d
    # ..."): the same ibv_wc status of a peer that stopped answering, code 6
    (
        "nccl.ib_error",
        S,
        "from peer",
        r"NET/IB\w* ?: ?Got completion from peer (?P<peer>\S+?)(?:<(?P<port>\d+)>)? with (?:status=|error )(?P<status>\d+)",
    ),
    # the same before NCCL named the peer (2.4-2.8 net_ib.cc): WARN("NET/IB : Got completion with error %d, opcode %d,
    # len %d, vendor err %d", wc->status, ...)
    ("nccl.ib_error", S, "Got completion with error", r"NET/IB : Got completion with error (?P<status>\d+)"),
    # src/transport/net_ib/common.cc: "NET/IB : %s:%d async fatal event: %s"
    ("nccl.ib_error", S, "async fatal event", r"NET/IB : (?P<dev>\S+?):(?P<port>\d+) async fatal event(?P<what>.*)"),
    # aws-ofi-nccl: "NET/OFI Request %p completed with error. RC: %d. Error: %d (%s)", and before 1.7 "... RC: %d.
    # Error: %s. Completed length: %ld, Request: %s" (fi_cq_strerror's text alone)
    (
        "nccl.ib_error",
        S,
        "completed with error",
        r"NET/OFI .*completed with error.*?Error: (?P<status>\d+) \((?P<what>\w+)\)",
    ),
    (
        "nccl.ib_error",
        S,
        "completed with error",
        r"NET/OFI .*?completed with error\. RC: (?P<rc>-?\d+)\. Error: (?P<what>[^.(]+)\. Completed length",
    ),
    # src/include/ibvwrap.h, src/misc/ibvwrap.cc: "Call to ibv_... failed", "ibv_post_send() failed with error %s";
    # src/include/checks.h SYSCHECK: "Call to %s failed : %s" (system, code 2). NCCL 2.0-2.2 (before the
    # public 2.x sources) printed "host:pid:tid [dev] include/socket.h:185 WARN ..." without "NCCL"
    (
        "nccl.syscall_failed",
        S,
        " WARN ",
        r"(?:NCCL|\.(?:h|cc|cu):\d+) WARN .*?(?:Call to (?P<call>\w+)(?:\(\))? (?:failed|returned)|"
        r"(?P<ibv>ibv_\w+)\(\) failed)",
    ),
    # NCCL <= 2.11 include/socket.h: WARN("Net : Socket creation failed : %s"). EAFNOSUPPORT: the interface NCCL
    # chose has an address family this host or container cannot open (IPv6 without IPv6), so the choice is at
    # fault; any other socket() failure is a system error
    (
        "nccl.no_interface",
        ORG,
        "Socket creation failed",
        r"(?:Net : |WARN )Socket creation failed : Address family not supported",
    ),
    ("nccl.syscall_failed", S, "Socket creation failed", r"(?:Net : |WARN )Socket creation failed : (?P<err>.+)"),
    # src/misc/shmutils.cc: WARN("Error while %s shared memory segment %s (size %d)", "creating" | "attaching to", ...):
    # /dev/shm too small (a container's 64 MB default) or not shared between the processes of a node
    (
        "nccl.syscall_failed",
        S,
        "shared memory segment",
        r"Error while (?P<call>(?:creating|attaching to) shared memory segment) (?P<err>\S+)",
    ),
    # NCCL's topology (src/os/linux.cc ncclOsGetPciPath, graph/xml.cc before 2.2x): WARN("Could not find real path of
    # %s", busPath) when realpath() of a GPU's or NIC's sysfs path fails (ncclSystemError): the host's own /sys (a
    # container or a VM that hides the PCI tree); net_ib/init.cc's "(%s)" form for an IB device
    ("nccl.syscall_failed", S, "Could not find real path", r"Could not find (?P<call>real path) of (?P<err>\S+)"),
    # Horovod (common/ops/nccl_operations.cc): std::string(op) + " failed: " + ncclGetErrorString(result), e.g.
    # "ncclCommInitRank failed: unhandled system error" inside a framework's exception
    (
        "nccl.error",
        S,
        " failed: ",
        r"\bnccl\w+ failed: (?P<what>unhandled (?:system|cuda) error|internal error|invalid (?:argument|usage)|"
        r"remote process exited or there was a network error)",
    ),
    # glog's CHECK_EQ of an NCCL call's result with ncclGetErrorString streamed after it: Caffe's NCCL_CHECK
    # (include/caffe/util/nccl.hpp: CHECK_EQ(result, ncclSuccess) << " " << ncclGetErrorString(result)), "Check failed:
    # result == ncclSuccess (2 vs. 0)  unhandled system error", and C++ projects' own check_nccl (`<< what << ": "`)
    (
        "nccl.error",
        S,
        "== ncclSuccess (",
        r"== ncclSuccess \(\d+ vs\. 0\)[^\n]{0,200}?(?P<what>unhandled (?:system|cuda) error|internal error|"
        r"invalid (?:argument|usage)|remote process exited or there was a network error)",
    ),
    # the same CHECK with nothing streamed after it (Paddle's platform/nccl_helper.h: PADDLE_ENFORCE(dynload::
    # ncclGroupEnd() == ncclSuccess)): "Check failed: ... == ncclSuccess (1 vs. 0)". Results 1-3 name the same error in
    # every NCCL (ncclUnhandledCudaError, ncclSystemError, ncclInternalError; NCCL 1's enum too); higher ones differ
    ("nccl.error", S, "== ncclSuccess (", r"\bnccl\w*\(\) == ncclSuccess \((?P<retcode>[123]) vs\. 0\)\s*$"),
    # XLA's message below, where the NCCL call failed with ncclUnhandledCudaError and the last warning NCCL logged is
    # CUDA's out of memory ("... failed: unhandled cuda error ... Last NCCL warning(error) log entry (may be unrelated)
    # 'Cuda failure 2 'out of memory''."): the CUDA failure behind the result is that allocation's
    (
        "cuda.oom",
        ORG,
        "Last NCCL warning",
        r"failed: unhandled cuda error\b.*Last NCCL warning\(error\) log entry .*'Cuda failure (?:\d+ )?'out of memory'",
    ),
    # XLA (xla/service/gpu/nccl_utils.cc, the XLA_NCCL_STATUS macro): "%s:%d: NCCL operation %s failed: %s. Last NCCL
    # warning(error) log entry (may be unrelated) '%s'." with ncclGetErrorString(s): JAX's and TensorFlow's NCCL calls
    (
        "nccl.error",
        S,
        "NCCL operation ",
        r"NCCL operation \S.*? failed: (?P<what>unhandled (?:system|cuda) error|internal error|invalid (?:argument|usage)|"
        r"remote process exited or there was a network error|Unable to load NCCL library)",
    ),
    # Paddle (paddle/fluid/platform/enforce.h, build_nvidia_error_msg for ncclResult_t): " Nccl error, " +
    # ncclGetErrorString(result), raised as ExternalError / EnforceNotMet with "(at file:line)" after it
    (
        "nccl.error",
        S,
        "Nccl error, ",
        r"\bNccl error, (?P<what>unhandled (?:system|cuda) error|internal error|invalid (?:argument|usage)|"
        r"remote process exited or there was a network error)",
    ),
    # aws-ofi-nccl (the EFA net plugin): NCCL_OFI_WARN("Unable to register memory (type = %d) for device %d. RC: %d,
    # Error: %s", ...), "Couldn't open AV. RC: %d, ERROR: %s", "Couldn't open CQ. RC: %d, ERROR: %s" and the like
    # (both spellings of the word): a libfabric call failed, the plugin returns ncclSystemError
    ("nccl.syscall_failed", S, "NET/OFI", r"NET/OFI (?P<call>.+?)\.? RC: -?\d+, (?:Error|ERROR): (?P<err>.+)"),
    # UCX (the transport of Open MPI's pml ucx, Horovod and NCCL's UCX plugin), ucs_error(): "[%lu.%06lu] [%s:%d:%d]
    # %16s:%-4u UCX  ERROR %s" with the verbs call that failed and its strerror: "ibv_create_cq(cqe=4096) failed: Cannot
    # allocate memory" (a locked-memory limit), "ibv_reg_mr(...) failed: ...": the transport failed on a system call
    # ... its socket transport's connect (uct/tcp, ucs/sys/sock.c: "connect(fd=%d, dest_addr=%s) failed: %m"): refused,
    # nothing listened at the peer's address (a peer gone, or an address others cannot reach: docker0's 172.17.0.1)
    (
        "net.conn_refused",
        S,
        "UCX",
        r"\bUCX\s+ERROR\s+connect\(fd=\d+, dest_addr=(?P<peer>[^)\s]+)\) failed: (?P<what>Connection refused)",
    ),
    ("nccl.syscall_failed", S, "UCX", r"\bUCX\s+ERROR\s+(?P<call>\w+)\(.*?\) failed: (?P<err>.+)"),
    # src/misc/socket.cc: "Net : error encountered when getting address info : %s" / "No valid ... pair found"
    ("nccl.syscall_failed", S, "Net : ", r"Net : (?:error encountered when getting address info|No valid)"),
    # NCCL RAS (src/ras/client_support.cc, 2.24+): INCOMPLETE communicators list
    # "  Rank %d -- GPU %s managed by process %d on node %s" / "  Rank %d -- [process information not found]";
    # DEAD: "  Process %d on node %s managing GPU%s %s"
    (
        "nccl.ras_missing",
        S,
        "managed by process",
        r"Rank (?P<comm_rank>\d+) -- GPU \S+ managed by process (?P<pid>\d+) on node (?P<node>\S+)",
    ),
    (
        "nccl.ras_missing",
        S,
        "process information not found",
        r"Rank (?P<comm_rank>\d+) -- \[process information not found\]",
    ),
    ("nccl.ras_missing", S, "managing GPU", r"Process (?P<pid>\d+) on node (?P<node>\S+) managing GPU"),
    # PyTorch distributed_c10d.py _store_based_barrier: "Timed out initializing process group in store based
    # barrier on rank: {rank}, for key: {key} (world_size={n}, worker_count={c}, timeout={t})", newer
    # "... on rank {rank}, for key: {key} (world_size={n}, num_workers_joined={c}, timeout={t} error={e})", and
    # the INFO line "Waiting in store based barrier to initialize process group for rank: {rank}, key: {key} (...)"
    (
        "rdzv.store_barrier",
        S,
        "store based barrier",
        r"store based barrier (?:on|to initialize process group for) rank:? (?P<reporter>\d+),? (?:for )?key: ?(?P<key>\S+?),? "
        r"\(world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)=(?P<count>\d+)",
    ),
    # ProcessGroupGloo.cpp monitoredBarrier, on ranks != 0: "Rank {r} successfully reached monitoredBarrier,
    # but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
    ("coll.monitored_peer", S, "successfully reached monitoredBarrier", r"Rank (?P<reporter>\d+) successfully reached"),
    # gloo/transport/tcp/pair.cc (<= 2023): GLOO_ERROR_MSG("connect ", peer_.str(), ": ", strerror(errno)); older
    # GLOO_ENFORCE_EQ(optval, 0, "SO_ERROR: ", strerror(optval)); newer tcp/socket.cc: "Connect timeout " peer
    (
        "gloo.connect_refused",
        S,
        "onnection refused",
        r"pair\.cc:\d+\] (?:connect \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+): |.*SO_ERROR: )Connection refused",
    ),
    ("gloo.connect_refused", S, "Connect timeout", r"Connect timeout \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+)"),
    # gloo pair.cc: "Socket unexpectedly closed " peer / "Socket closed " peer / "Read timeout " / "Write timeout "
    ("gloo.peer_closed", S, "ocket", r"Socket (?:unexpectedly )?closed \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+)"),
    ("coll.gloo_timeout", S, "timeout [", r"(?:Read|Write) timeout \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+)"),
    # gloo (pytorch/gloo 70dc360) transport/tcp/unbound_buffer.cc: a recv/send that timed out first signals every other
    # pair of the context with "Application timeout caused pair closure" before it throws "Timed out waiting %dms for
    # recv operation to complete": both are the collective timeout, the pair closure its echo on the other pairs
    ("coll.gloo_timeout", S, "Application timeout caused pair closure", r"Application timeout caused pair closure"),
    # Huawei CANN's EI0006 (HCCL's socket wait on Ascend, HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT): "EI0006: Getting
    # socket times out. Reason: Remote Rank did not send the data in time." and the newer "Get_Socket_Timeout(EI0006):
    # Getting socket times out. Reason: 1. The remote does not initiate a connect request": a rank waited for its peer
    ("coll.gloo_timeout", S, "EI0006", r"\bEI0006\b.*?Getting socket times out|Get_Socket_Timeout\(EI0006\)"),
    # transport/tcp/helpers.h connectLoop: TimeoutError("timed out connecting: " + what) once the retries run out: a
    # connect to a peer that never listened, as "Connect timeout" is
    ("gloo.connect_refused", S, "timed out connecting", r"timed out connecting: ?(?P<why>.*)"),
    # transport/tcp/pair.cc write: GLOO_ERROR_MSG("writev ", peer_.str(), ": ", strerror(errno)) (EPIPE, ECONNRESET):
    # the peer closed the pair under a send, as "Read error %s: %s" under a recv
    ("gloo.peer_closed", S, "writev ", r"writev \[?(?P<peer>[^\]\s]+?)\]?:(?P<port>\d+): (?P<why>.+)"),
    # c10d socket.cpp SocketConnectOp::tryConnect: "The {}network addresses of ({}, {}) cannot be retrieved (gai error: {}
    # - {})." ("IPv6 " / "IPv4 " / ""): a warning per family tried (an IPv6 lookup may fail where IPv4 works), so a fact;
    # older c10d Utils.cpp tcputil::connect throws std::invalid_argument("host not found: " + gai_strerror(err)) (Python's
    # ValueError): the store's host name does not resolve, the client never connects (no timeout)
    (
        "rdzv.gai_failed",
        Role.FACT,
        "cannot be retrieved (gai error",
        r"The (?P<family>IPv[46] )?network addresses of \((?P<host>[^,]*), (?P<port>\d+)\) cannot be retrieved",
    ),
    ("rdzv.unresolved", S, "host not found: ", r"host not found: (?P<why>.+)"),
    # c10d socket.cpp: "The client socket has failed to connect to any network address of ({}, {})." and
    # "The client socket has failed to connect to {} (errno: {} - {})." (a W line per retry; "(system error: {} - {})"
    # on Windows, whose socket errors are WSA codes: 10061 refused, 10049 address not available)
    (
        "rdzv.connect_failed",
        S,
        "failed to connect to",
        r"client socket has failed to connect to (?:any network address of \((?P<host>[^,]+), (?P<port>\d+)\)|"
        r"\[?(?P<addr>[^\s\]]+?)\]?:(?P<aport>\d+)(?= \((?:errno|system error):))(?:.*?\((?:errno|system error): "
        r"(?P<errno>\d+))?",
    ),
    # Intel oneCCL (src/common/log/log.hpp LOG_ERROR: "|CCL_ERROR| %s:%d %s: %s", file, line, function, message), and its
    # exception as torch-ccl raises it ("oneCCL: %s:%d %s: EXCEPTION: %s"): the collective library's own failure (its
    # workers, its ATL/OFI transport), which Intel's stacks have in NCCL's place
    # but for Level Zero's own out-of-memory result (ze_api.h ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) inside it: the
    # device's memory ran out in the collective, as NCCL's own allocation failing (an oom, not a transport failure)
    ("cuda.oom", ORG, "OUT_OF_DEVICE_MEMORY", r"\bZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\b"),
    ("ccl.error", S, "|CCL_ERROR|", r"\|CCL_ERROR\| (?P<where>\S+:\d+) (?P<func>\w+): (?P<what>.+)"),
    ("ccl.error", S, "oneCCL: ", r"oneCCL: (?P<where>\S+:\d+) (?P<func>\w+): EXCEPTION: (?P<what>.+)"),
    # PyTorch/XLA's mesh service client (torch_xla xla_client/mesh_service.cc, MeshClient): XLA_CHECK(impl_->channel->
    # WaitForConnected(...)) << "Failed to connect to client mesh master: " << address: a process never reached the
    # mesh master, XLA's rendezvous (the check's own line, and the address line after it)
    (
        "rdzv.connect_failed",
        S,
        "Failed to connect to client mesh master",
        r"Failed to connect to client mesh master: (?P<host>\S+?):(?P<port>\d+)\b",
    ),
    ("rdzv.connect_failed", S, "mesh_service.cc:", r"mesh_service\.cc:\d+ : Check failed: impl_->channel->"),
    # ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "[{rank}] is setting up NCCL communicator and retrieving ncclUniqueId
    # from [0] via c10d key-value store by key '{key}', but store->get('{key}') got error: {what}" (older releases:
    # "retreiving"); the key is the communicator counter (a collective) or "low:high" (a single p2p op), set by the
    # group's rank 0, or by the pair's lower rank
    (
        "nccl.uniqueid_wait",
        S,
        "ncclUniqueId from",
        r"\[(?P<rank>\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[(?P<root>\d+)\]"
        r"(?: via c10d key-value store by key '(?P<key>[^']*)'(?:, but store->get\('[^']*'\) got error: ?(?P<what>.*))?)?",
    ),
    # Caffe2 caffe2/distributed/store_handler.h: STORE_HANDLER_TIMEOUT("Wait timeout for name(s): ", Join(" ", names))
    # (file_store_handler.cc, redis_store_handler.cc): the keys a gloo common world waited for
    ("rdzv.wait_keys", S, "Wait timeout for name", r"Wait timeout for name\(s\): (?P<keys>.+)"),
    # gloo (pytorch/gloo 70dc360) rendezvous/hash_store.cc, file_store.cc, redis_store.cc: GLOO_ERROR_MSG("Wait timeout
    # for key(s): ", MakeString(keys)); transport/context.cc writes "rank_<rank>" (its host name) and "<rank>" (its
    # addresses), so the key names the rank that never wrote it
    ("rdzv.wait_keys", S, "Wait timeout for key", r"Wait timeout for key\(s\): (?P<keys>.+)"),
    # c10d socket.cpp (pytorch/pytorch) SocketImpl::waitForInput: C10D_WARNING("waitForInput: socket {} timed out after
    # {}ms", *this, timeout) with SocketImpl's "SocketImpl(fd=%d, addr=%s, remote=%s)": a store client whose request got
    # no reply (the store's host or its server is gone); the repeated "poll for socket {} returned 0, likely a timeout"
    # before it is a retry (classify's rdzv.store_endpoint). The remote is the store, a victim's view of it
    (
        "rdzv.store_timeout",
        S,
        "waitForInput",
        r"waitForInput: socket .*?remote=\[?(?P<host>[^\]\s]*?)\]?:(?P<port>\d+)\) timed out after (?P<ms>\d+) ?ms",
    ),
    # older c10d: socket.cpp "connect() timed out. Original timeout was {} ms.", Utils.hpp "Socket Timeout",
    # FileStore.cpp / TCPStore.cpp "Wait timeout"
    (
        "rdzv.store_timeout",
        S,
        "imeout",
        r"(?:connect\(\) timed out\. Original timeout was (?P<ms>\d+) ms|Error: Socket Timeout$|: Socket Timeout$|: Wait timeout\b)",
    ),
    # NCCL src/misc/socket.cc ncclSocketInit: "connecting to address %s with family %d is neither AF_INET(%d) nor
    # AF_INET6(%d)": an address that was never set, i.e. no interface matched NCCL_SOCKET_IFNAME
    (
        "nccl.no_interface",
        ORG,
        "is neither AF_INET",
        r"connecting to address (?P<addr>\S*) ?with family (?P<family>\d+)",
    ),
    # gloo/transport/tcp/device.cc: GLOO_ENFORCE(ifa != nullptr, "Unable to find address for: ", iface) and the
    # hostname lookup beside it; an excerpt may keep only the "[enforce fail at .../device.cc:84]" line
    (
        "nccl.no_interface",
        ORG,
        "device.cc",
        r"enforce fail at \S*gloo/transport/tcp/device\.cc:\d+\](?:.*Unable to find address for: ?(?P<iface>\S+))?",
    ),
    # NCCL src/init.cc showVersion: "NCCL version %d.%d.%d+cuda%d.%d" (once per process): versions compared across
    # the log; a different one on some node is the version mismatch NCCL itself may never report
    ("misc.nccl_version", S, "NCCL version", r"^NCCL version (?P<version>\d+\.\d+\.\d+)\S*$"),
    # Horovod horovod/common/stall_inspector.cc: "One or more tensors were submitted to be reduced, gathered or
    # broadcasted by subset of ranks and are waiting for remainder of ranks for more than %d seconds. ..." then per
    # tensor "NAME [missing ranks: 0, 2]" (older "[ready ranks: 1, 3]"), newer a "Missing ranks:" block of "R: [...]"
    ("hvd.stall", S, "ranks: ", r"(?P<name>[\w./:-]+) \[(?P<which>missing|ready) ranks: (?P<ranks>[\d, ]+)\]"),
    ("hvd.missing_block", S, "Missing ranks:", r"^Missing ranks:\s*$"),
    ("hvd.missing_block", S, "Stalled ranks:", r"^Stalled ranks:\s*$"),  # the same block before Horovod 0.20
    # horovod/common/operations.cc SHUT_DOWN_ERROR, as TensorFlow raises it (AbortedError, or "OP_REQUIRES failed at
    # mpi_ops.cc: ... Unknown:"): "Horovod has been shut down. This was caused by an exception on one of the ranks or
    # an attempt to allreduce ... after one of the ranks finished execution": a survivor's words, the error elsewhere
    ("hvd.shut_down", S, "Horovod has been shut down", r"Horovod has been shut down"),
    # NCCL RAS status (src/ras/client_support.cc): the section a rank line belongs to is read from the lines above
    # it ("#0-0 (hash) INCOMPLETE" / "MISMATCH") by blocks.ras_section
    # PaddlePaddle's CUDA allocator (paddle/fluid/memory/allocation/cuda_allocator.cc, BadAlloc's ResourceExhaustedError):
    # "Out of memory error on GPU %d. Cannot allocate %s memory on GPU %d, %s memory has been allocated and available
    # memory is only %s." (the GPU is the process's device, not a rank)
    ("cuda.oom", ORG, "Out of memory error on GPU", r"Out of memory error on GPU \d+\. Cannot allocate"),
    # ... raised as an operator's exception first ("SystemError: (Fatal) Operator conv2d raises an
    # paddle::memory::allocation::BadAlloc exception.", the allocator's message on the lines after): Paddle's
    # allocation failure is its out-of-memory error
    ("cuda.oom", ORG, "BadAlloc", r"raises an paddle::memory::allocation::BadAlloc exception"),
    # NCCL src/include/alloc.h: WARN("Failed to CUDA calloc %ld bytes") / "Failed to CUDA malloc" / "Failed to CUDA host
    # alloc" / "Failed to CUDA calloc async": NCCL could not get GPU memory for its buffers
    (
        "cuda.oom",
        ORG,
        "Failed to CUDA",
        r"Failed to CUDA (?:host alloc|calloc async|calloc|malloc) (?P<bytes>\d+) bytes",
    ),
    # ProcessGroupNCCL.cpp: "Received a dump signal due to a collective timeout from {rank} and we will try our best
    # to dump the debug info": the rank that noticed the timeout first, not its cause
    (
        "coll.dump_signal",
        S,
        "dump signal",
        r"dump signal (?:due to a collective timeout )?from\s+(?:rank\s*)?(?P<from>\d+)",
    ),
    # c10d/CPUAllocator: "DefaultCPUAllocator: can't allocate memory: you tried to allocate %d bytes" (older "not
    # enough memory"); ROCm builds print "HIP out of memory" / "HIP error: %s" where CUDA builds print "CUDA ..."
    ("host.oom", ORG, "DefaultCPUAllocator", r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"),
    ("cuda.oom", ORG, "HIP out of memory", r"HIP out of memory"),
    # cudaErrorMemoryAllocation (cudaGetErrorName of error 2) wherever a library prints the name: RAPIDS rmm's
    # cuda_memory_resource ("std::bad_alloc: out_of_memory: CUDA error at: %s:%d: cudaErrorMemoryAllocation out of
    # memory"), cupy's CUDARuntimeError
    ("cuda.oom", ORG, "cudaErrorMemoryAllocation", r"\bcudaErrorMemoryAllocation\b"),
    # bitsandbytes' CUDA_CHECK_RETURN (csrc/ops.cuh): printf("Error %s at line %d in file %s\n",
    # cudaGetErrorString(status), __LINE__, __FILE__): a CUDA call of its kernels failed
    (
        "cuda.error",
        ORG,
        " at line ",
        r"^Error (?P<what>.+?) at line \d+ in file \S*bitsandbytes\S*",
    ),
    # torch_npu's HCCL_CHECK_ERROR (torch_npu/csrc/distributed/HCCLUtils.hpp): "HCCL function error: %s, error code is
    # %d" with the HCCL call and its HcclResult (hccl_types.h; 9, a timeout, is left to the timeout rules)
    (
        "nccl.error",
        S,
        "HCCL function error",
        r"HCCL function error: (?P<call>\w+)\(.*?\), error code is (?P<hccl>(?!9\b)\d+)",
    ),
    # SGLang's model runner (python/sglang/srt/model_executor/model_runner.py load_model): raise ValueError(f"TP rank
    # {self.tp_rank} could finish the model loading, but there are other ranks that didn't finish loading. It is likely
    # due to unexpected failures (e.g., OOM) or a slow node."): the reporter is one that did finish; which did not, it
    # does not say
    (
        "coll.peers_behind",
        S,
        "could finish the model loading",
        r"TP rank (?P<reporter>\d+) could finish the model loading, but there are other ranks",
    ),
    # torch_npu's and torch's XPU caching allocators, CUDA's message under their device's name: "NPU out of memory.
    # Tried to allocate %s (NPU %d; %s total capacity; ...)", "XPU out of memory. Tried to allocate %s (GPU %d; ...)"
    ("cuda.oom", ORG, " out of memory. Tried to allocate", r"\b(?:NPU|XPU) out of memory\. Tried to allocate"),
    ("cuda.error", ORG, "HIP error", r"HIP error: (?P<what>[^.\n]+)"),
    # RCCL src/include/checks.h CUDACHECK/CUCHECK: WARN("HIP failure '%s'", hipGetErrorString(err)) (returns
    # ncclUnhandledCudaError), also "HIP failure: '%s'" from HIP's own check macros
    ("cuda.error", ORG, "HIP failure", r"HIP failure:? '(?P<what>[^']+)'"),
    # c10 CUDAException.cpp / hipified HIPException.cpp: "Search for `cudaErrorXxx' in https://... for more
    # information." (the error's enum name, after the "CUDA error:" / "HIP error:" header an excerpt may have cut)
    ("cuda.error", ORG, "Search for `", r"Search for `(?P<what>(?:cuda|hip)Error\w+)'"),
    # vLLM csrc/cumem_allocator.cpp: "CUDA Error: %s at %s:%d" (cuGetErrorString), e.g. "out of memory"
    ("cuda.oom", ORG, "CUDA Error: out of memory", r"CUDA Error: out of memory"),
    ("cuda.error", ORG, "CUDA Error: ", r"CUDA Error: (?P<what>.+?) at \S+:\d+"),
    # TensorFlow stream_executor/cuda/cuda_driver.cc: "failed to allocate %s (%llu bytes) from device: %s"
    # (CUDA_ERROR_OUT_OF_MEMORY); the BFC allocator's "Allocator (%s) ran out of memory trying to allocate %s"
    ("cuda.oom", ORG, "from device", r"failed to allocate \S+ \(\d+ bytes\) from device: CUDA_ERROR_OUT_OF_MEMORY"),
    ("cuda.oom", ORG, "ran out of memory", r"Allocator \(\w+\) ran out of memory trying to allocate"),
    # Slurm src/srun/launch.c _task_finish: error("%s: %s %s: Out Of Memory", hosts, "task"/"tasks", ids): the
    # task (SLURM_PROCID) the step's cgroup OOM-killed, printed once; a single task id is that task's rank
    (
        "host.oom",
        ORG,
        "Out Of Memory",
        r"srun: error: (?P<task_host>[^:\s]+): tasks? (?P<tasks>\d+(?:[,\-]\d+)*): Out Of Memory",
    ),
    # cuDNN/cuBLAS status errors surface as "cuDNN error: CUDNN_STATUS_%s" / "CUBLAS_STATUS_%s" (PyTorch <= 0.4:
    # "CuDNN error: ...")
    ("cuda.error", ORG, "DNN error: ", r"[Cc]u[Dd][Nn][Nn] error: (?P<what>\w+)"),
    # Ray's raylet (src/ray/raylet/node_manager.cc, python/ray/exceptions.py WorkerCrashedError): "A worker died or was
    # killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the
    # dead worker." (which worker and why in the lines after it): a worker failed, none named, no exit code
    (
        "agent.child_failed",
        Role.SUMMARY,
        "A worker died or was killed",
        r"(?P<ray>A worker died or was killed) while executing a task",
    ),
    # launchers that reach nodes over ssh before any worker starts: OpenSSH's "ssh: connect to host %s port %s: %s"
    # (strerror: Connection refused, No route to host, Connection timed out), DeepSpeed's runner (launcher/runner.py):
    # f"Using hostfile at {hostfile} but host={first_host} was not reachable via ssh. ..."
    (
        "net.conn_refused",
        S,
        "ssh: connect to host",
        r"(?P<ssh>ssh): connect to host (?P<peer>\S+) port (?P<port>\d+): (?P<what>.+)",
    ),
    # OpenSSH sshconnect2.c: fatal("%s@%s: Permission denied (%s).", user, host, methods) when every authentication
    # method failed: the launcher's ssh (mpirun's rsh agent, pdsh) cannot log in to the node, so nothing starts there
    (
        "net.conn_refused",
        S,
        "Permission denied (",
        r"(?P<ssh>)[\w.-]+@(?P<peer>[\w.-]+): Permission denied \((?P<what>[\w,-]+)\)\.",
    ),
    # Open MPI plm base (help-plm-base.txt [daemon-failed]) / PRRTE: "ORTE was unable to reliably start one or more
    # daemons." when the launcher's ssh (or kubectl exec) to a node failed or its daemon did not call back
    (
        "net.conn_refused",
        S,
        "unable to reliably start one or more daemons",
        r"(?P<ssh>)\b(?:ORTE|PRTE) was unable to reliably (?P<what>start one or more daemons)",
    ),
    ("net.conn_refused", S, "was not reachable via ssh", r"host=(?P<peer>\S+) was not reachable via (?P<ssh>ssh)"),
    # OpenSSH ssh.c: fatal("%s: Could not resolve hostname %.100s: %s", __progname, host, ssh_gai_strerror(r)): the
    # launcher's ssh cannot even name the node (a pod's headless-service record not there yet, a typo in a hostfile)
    (
        "net.conn_refused",
        S,
        "Could not resolve hostname",
        r"(?P<ssh>ssh): Could not resolve hostname (?P<peer>[^\s:]+): (?P<what>.+)",
    ),
    # ColossalAI's `colossalai run` (colossalai/cli/launcher/multinode_runner.py run_on_host): click.echo(f"Error: failed
    # to run {cmds} on {hostinfo.hostname}, is localhost: {hostinfo.is_local_host}, exception: {e}") where fabric's
    # ssh connection or the remote command raised: a failed login or connect (paramiko's "not a valid RSA private key
    # file", "No authentication methods available", "Authentication failed.", a refused or timed-out connect) leaves
    # that node's torchrun unstarted; invoke's "Encountered a bad command exit code!" is the remote command's own exit
    (
        "net.conn_refused",
        S,
        ", is localhost: ",
        r"Error: failed to run .*? on (?P<peer>\S+), is localhost: (?:True|False), exception: "
        r"(?P<ssh>)(?!Encountered a bad command exit code)(?P<what>.+)",
    ),
    # a launcher's own ssh as Python's subprocess reports it (DeepSpeed's runner: "ssh HOST hostname -I"): "Command '%s'
    # returned non-zero exit status 255." is OpenSSH's own failure (ssh(1): "exits with the exit status of the remote
    # command or with 255 if an error occurred")
    (
        "net.conn_refused",
        S,
        "returned non-zero exit status 255",
        # options start with "-", a value never does: one way to read each token (no backtracking blow-up)
        r"Command '\[?'?(?P<ssh>ssh) (?:-\w+(?: [^\s'\-][^\s']*)? )*(?P<peer>[^\s'\-][^\s']*) [^']*'(?:\]')? returned "
        r"non-zero exit status 255\b",
    ),
    # c10d's TCPStore client (TCPStore.cpp / Utils.hpp): "[c10d] {op} failed on SocketImpl(fd=N, addr=..., remote=...):
    # {strerror}" where the store's side went away (the heartbeat monitor's "should dump" check, a ping, a get)
    (
        "gloo.peer_closed",
        S,
        "failed on SocketImpl",
        r"\[c10d\] \w+ failed on SocketImpl\(.*?remote=\[?(?P<peer>[^\]\s]*?)\]?:(?P<port>\d+)\): Broken pipe",
    ),
    # Ray's worker-exit text (src/ray/core_worker, gcs): "Worker unexpectedly exits with a connection error code 2. End of
    # file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory
    # usage. (2) ray stop --force is called. (3) ...": a list of possibilities, not an OOM
    ("misc.error", S, "potential root causes", r"There are some potential root causes"),
    # launchers that wrap the workers (accelerate, deepspeed, mp.spawn): the worker's exit as the launcher sees it.
    # subprocess.py: "Command '%s' returned non-zero exit status %d." (negative: died of signal -N);
    # torch/multiprocessing/spawn.py: "process %d terminated with signal %s" / "process %d terminated with exit code %d"
    (
        "agent.child_failed",
        Role.SUMMARY,
        "returned non-zero exit status",
        r"returned non-zero exit status (?P<exit>-?\d+)",
    ),
    (
        "agent.child_failed",
        Role.SUMMARY,
        "terminated with exit code",
        r"process (?P<local>\d+) terminated with exit code (?P<exit>-?\d+)",
    ),
    (
        "agent.spawn_signal",
        Role.SUMMARY,
        "terminated with signal",
        r"process (?P<local>\d+) terminated with signal (?P<sig>SIG\w+)",
    ),
    # Paddle's launcher (paddle/distributed/launch/controllers/controller.py): logger.error(f"Container failed !!!\n{fc[0]}")
    # with Container.__str__ "Container rank {rank} status {status} cmd {cmd} code {exit_code} log {errfile}": the
    # worker's exit as the launcher saw it, its own error in that log file
    (
        "agent.child_failed",
        Role.SUMMARY,
        "status failed cmd",
        r"Container rank \d+ status failed cmd .*? code (?P<exit>-?\d+)(?: log (?P<log>\S+))?",
    ),
    # horovodrun's gloo launcher (horovod/runner/gloo_run.py _exec_command): print('Process {idx} exit with status code
    # {ec}.'), idx the slot's rank, printed by each worker's thread as its process exits (so in exit order)
    (
        "agent.child_failed",
        Role.SUMMARY,
        "exit with status code",
        r"\bProcess (?P<reporter>\d+) exit with status code (?P<exit>-?\d+)\.",
    ),
    # PaddlePaddle's launcher (python/paddle/distributed/utils/launch_utils.py watch_local_trainers, fleet's
    # launch_utils.py): logger.error("ABORT!!! Out of all {} trainers, the trainer process with rank={} was aborted.
    # Please check its log.".format(nranks, error_rank)), error_rank every trainer it found exited non-zero in one poll
    # (not in time order): one alone is the one that ended the job, several name none
    (
        "agent.child_failed",
        Role.SUMMARY,
        "trainer process with rank=",
        r"ABORT!!! Out of all \d+ trainers, the trainer process with rank=\[(?:(?P<reporter>\d+)|[\d, ]*)\] was aborted",
    ),
    # Open MPI (open-mpi/ompi v4.1.8, ea8f4d0) orte/tools/orterun/help-orterun.txt [orterun:proc-aborted-strsignal] "%s
    # noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s)." and [orterun:proc-aborted] (no
    # name); PRRTE's help-prun.txt (Open MPI 5) prints the same under its tool's name: the process the launcher saw die
    # of a signal first, in the order it learned of them (so low confidence, as "The first process to do so was:"); a
    # PID or node a user blanked out still names the rank; its PID and node tie Open MPI's own "[node:pid] Signal:"
    # report (opal's backtrace handler) to that rank (ranks.py)
    (
        "agent.child_failed",
        Role.SUMMARY,
        "noticed that process rank",
        r"noticed that process rank (?P<reporter>\d+) with PID (?P<pid>\S+) on node (?:(?P<node>[^\s,]+?) )?exited on signal "
        r"(?P<signum>\d+)",
    ),
    # Open MPI orte/tools/orterun/help-orterun.txt [orterun:proc-exit-no-sync] / [orterun:proc-exit-no-sync-unknown]
    # (v1.4-v4.1): "%s has exited due to process rank %lu with PID %lu on\nnode %s exiting improperly." (or "exiting
    # without calling "finalize"."): the process the launcher saw end first without MPI_Finalize, low confidence as
    # "The first process to do so was:"; its node is on the next line as pasted
    (
        "agent.child_failed",
        Role.SUMMARY,
        "has exited due to process rank",
        r"has exited due to process rank (?P<reporter>\d+) with PID \S+ on(?: node (?P<node>[^\s,]+) exiting)?",
    ),
    # MS-MPI's mpiexec ("job aborted:" / "[ranks] message"): "[%d] process exited without calling finalize", the rank
    # that ended first; the others are "[1-3] terminated" by it
    (
        "agent.child_failed",
        Role.SUMMARY,
        "process exited without calling finalize",
        r"process exited without calling finalize",  # the rank: the "[%d]" the line's prefix reader took (filescan.py)
    ),
    # Open MPI opal/mca/btl/tcp/help-mpi-btl-tcp.txt [peer hung up] (v4.x): "An MPI communication peer process has
    # unexpectedly disconnected.  This usually indicates a failure in the peer process (e.g., a crash or otherwise
    # exiting without calling MPI_FINALIZE first)." then "Local host / Local PID / Peer host": a process of the job
    # died; the text names no rank, and the peer's host is where it ran, not evidence of a cause
    (
        "agent.child_failed",
        Role.SUMMARY,
        "peer process has unexpectedly disconnected",
        r"An MPI communication peer process has unexpectedly disconnected",
    ),
    # Open MPI orte/mca/errmgr/base/help-errmgr-base.txt [node-died] (v1.x-v4.1), PRRTE's the same under its name (Open
    # MPI 5): "ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : %s on node %s\n  Remote daemon: %s
    # on node %s\n\nThis is usually due to either a failure of the TCP network connection to the node, or possibly an
    # internal failure of the daemon itself. ...": a node's daemon is gone (its processes died with it, or the network
    # failed), and mpirun ends the job; the daemon's vpid is no rank, and the node is named by the launcher's view alone
    (
        "agent.child_failed",
        Role.SUMMARY,
        "has lost communication with a remote daemon",
        r"\b(?:ORTE|PRTE) has lost communication with a remote daemon",
    ),
    # MosaicML composer's launcher (composer/cli/launcher.py _monitor_processes): log.error(f'Rank {global_rank} crashed
    # with exit code {process.returncode}.') for the first process it finds dead, then it stops the others: that rank
    # ended first, low confidence (its own error is the process's log)
    (
        "agent.child_failed",
        Role.SUMMARY,
        "crashed with exit code",
        r"\bRank (?P<reporter>\d+) crashed with exit code (?P<exit>-?\d+)\.",
    ),
    # Open MPI ompi/mpi/help-mpi-api.txt [mpi-abort] (v4.1.8; the same text in v5): "MPI_ABORT was invoked on rank %d in
    # communicator %s\nwith errorcode %d.": the process that called MPI_Abort (its rank in that communicator: a rank of
    # the job in MPI_COMM_WORLD only), as weak as an exit code under its own error, if the log has it
    (
        "agent.child_failed",
        Role.SUMMARY,
        "MPI_ABORT was invoked on rank",
        r"MPI_ABORT was invoked on rank (?P<reporter>\d+) in communicator MPI_COMM_WORLD\b",
    ),
    # orte/mca/errmgr/default_hnp/errmgr_default_hnp.c + help-errmgr-base.txt [normal-termination-but]: "Primary job
    # terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, the job has been aborted."
    # (the second line; "processes returned\nnon-zero exit codes." for several): a worker failed, none named
    (
        "agent.child_failed",
        Role.SUMMARY,
        "Per user-direction",
        r"(?P<nonzero>non-zero exit codes?)\.? Per user-direction, the job has been aborted",
    ),
    # c10d socket.cpp SocketListenOp::run: "The server socket has failed to listen on any local network address." (and
    # TCPStoreLibUvBackend.cpp's "... local network address. port: %d, useIpv6: %d, code: %d, name: %s, message: %s"):
    # every address the store tried to bind was refused, its per-address errno (98, EADDRINUSE) cut or on another line
    (
        "net.addr_in_use",
        ORG,
        "failed to listen on any local network address",
        r"failed to listen on any local network address\.?(?: port: (?P<port>\d+))?",
    ),
    # c10d socket.cpp: the same per address, "The server socket has failed to bind to {} (errno: {} - {})." (a paste
    # may wrap the line after "(errno:"): errno 98 is EADDRINUSE
    ("net.addr_in_use", ORG, "failed to bind to", r"failed to bind to \S*?:(?P<port>\d+) \(errno: 98\b"),
    # Ascend HCCL (hccl_socket.cc HcclSocket::Listen): HCCL_ERROR("%s socket type[%u], listen on ip[%s] and specific
    # port[%u] fail. Please check the port status and whether the port is being used by other process."): the host is the
    # address it could not listen on
    (
        "net.addr_in_use",
        ORG,
        "and specific port[",
        r"listen on ip\[(?P<host>[^\]%]+)(?:%[^\]]*)?\] and specific port\[(?P<port>\d+)\] fail",
    ),
    # Huawei CANN's EJ0001 (the HCCL communicator's device-side network process, HCCP): "Failed to initialize the HCCP
    # process. Reason: Maybe the last training process is running.": HCCL's init failed on a held device resource, as
    # NCCL's init returns a system error (ncclSystemError)
    ("nccl.error", S, "Failed to initialize the HCCP process", r"(?P<what>Failed to initialize the HCCP process)"),
    # accelerate's launcher pre-check (commands/launch.py): "Tried to launch distributed communication on port
    # `{port}`, but another process is utilizing it."
    ("net.addr_in_use", ORG, "another process is utilizing it", r"on port `?(?P<port>\d+)`?, but another process"),
    # gRPC's UNAVAILABLE (grpc_status 14) "Socket closed": the peer's end of the channel closed (grpc core's TCP endpoint
    # read 0 bytes), as TensorFlow raises it (errors_impl.UnavailableError) from a collective or a remote call: a peer
    # gone, as gloo's "Connection closed by peer"
    ("gloo.peer_closed", S, "Socket closed", r"(?:UnavailableError: |\"grpc_message\":\")Socket closed\b"),
    # TensorPipe (torch.distributed.rpc's transport) reports libuv's errors as "ECONNRESET: connection reset by peer"
    # and "EPIPE: broken pipe", and a pipe its peer closed as "pipe closed (this error originated at
    # tensorpipe/core/pipe_impl.cc...)": the peer's end gone, as gloo's "Connection closed by peer"
    ("gloo.peer_closed", S, "ECONNRESET", r"\bECONNRESET: connection reset by peer\b"),
    ("gloo.peer_closed", S, "EPIPE", r"\bEPIPE: broken pipe\b"),
    ("gloo.peer_closed", S, "pipe closed", r"\bpipe closed \(this error originated at tensorpipe/"),
    # PyTorch/XLA's mesh service (xla_client/mesh_service.cc): "Failed to meet rendezvous '%s': %s (%d)", the gRPC
    # status's message and code: 14 (UNAVAILABLE) "Socket closed" or a reset is the mesh master's end gone
    (
        "gloo.peer_closed",
        S,
        "Failed to meet rendezvous",
        r"Failed to meet rendezvous '[^']*': (?:Socket closed|Connection reset by peer) \(14\)",
    ),
    # LightGBM's socket network (src/network/linkers_socket.cpp): Log::Fatal("Binding port %d failed", port) after
    # "Trying to bind port %d..." (TcpSocket::Bind refused the port its machine list or local_listen_port names), also
    # inside SynapseML's "Network init call failed in LightGBM with error: ..."
    ("net.addr_in_use", ORG, "Binding port", r"\bBinding port (?P<port>\d+) failed"),
    # LightGBM src/network/socket_wrapper.hpp: Log::Fatal("Socket %s error, %s (code: %d)", strerror) since 3.2.0,
    # "Socket %s error (code: %d)" on Windows, "Socket %s error, code: %d" before: the errno says which, a reset
    # (104 Linux, 54 BSD and macOS, 10054 Winsock) a peer gone, a refusal (111, 61, 10061) nobody listening
    ("gloo.peer_closed", S, "code: ", r"\bSocket (?:recv|send|accept) error[^(]*?\(?code: (?:104|54|10054)\b"),
    ("net.conn_refused", S, "code: ", r"\bSocket (?:recv|send|accept) error[^(]*?\(?code: (?:111|61|10061)\b"),
    # LightGBM linkers_socket.cpp Construct: Log::Warning("Connecting to rank %d failed, waiting for %d milliseconds")
    # at each retry of a connect to a machine that does not listen (yet): refused until it starts, or for good
    ("net.conn_refused", S, "Connecting to rank", r"Connecting to rank \d+ failed, waiting for \d+ milliseconds"),
    # horovodrun (horovod/runner/launch.py): Timeout(start_timeout, message='Timed out waiting for {activity}. Please
    # check connectivity between servers. ...'), raised by util/timeout.py check_time_out_for(activity) while the
    # driver waits for every host's task service to register (common/service/driver_service.py
    # wait_for_initial_registration: 'tasks to start'; then 'tasks to update task-to-task addresses'): hosts that
    # never joined; the raising frame's source line stands for it where an excerpt cut the exception below it
    ("rdzv.timeout", S, "Timed out waiting for tasks to", r"Timed out waiting for (?P<what>tasks to [\w -]+)"),
    ("rdzv.timeout", S, "check_time_out_for(", r"check_time_out_for\(\s*'(?P<what>tasks to [\w -]+)'"),
    # NCCL src/transport/net_ib.cc: WARN("NET/IB : %s:%d Got async error event: %s", ...) with ibv_event_type_str:
    # a port that went down ("port error", IBV_EVENT_PORT_ERR) under a running job is the network failing
    # ("port active" is it coming back: no failure)
    (
        "nccl.ib_error",
        S,
        "Got async error event: port error",
        r"NET/IB : (?P<dev>\S+?):(?P<port>\d+) Got async error event: (?P<what>port error)",
    ),
    # the same with ibv_event_type_str's names of a local failure (the HCA, a queue pair or a completion queue of this
    # host, its port going down as the newer form above; "GID table change", "port active" and the like are no failure): NCCL 2.4-2.18 net_ib.cc WARN("NET/IB : Got
    # async event : %s", ...), later "NET/IB : %s:%d Got async event : %s"
    (
        "nccl.ib_error",
        S,
        "Got async event",
        r"NET/IB : (?:(?P<dev>\S+?):(?P<port>\d+) )?Got async event ?: (?P<what>local catastrophic error|"
        r"local work queue catastrophic error|invalid request local work queue error|local access violation work queue "
        r"error|CQ error|SRQ catastrophic error|path migration request error|port error)",
    ),
    # ncclGetErrorString's text after any framework's "NCCL ...: " (TensorFlow, HybridBackend: "NCCL communication
    # aborted: unhandled system error"): after the specific rules above, which read more of these lines
    # NCCL's words alone, wherever a framework put them (after ": ", a glog CHECK's "(2 vs. 0) ", a C++ runtime_error's
    # "NCCL Error 1: "): ncclGetErrorString's texts for ncclSystemError and ncclUnhandledCudaError are NCCL's own
    ("nccl.error", S, "unhandled system error", r"\b(?P<what>unhandled system error)\b"),
    ("nccl.error", S, "unhandled cuda error", r"\b(?P<what>unhandled cuda error)\b"),
    ("nccl.error", S, "unhandled CUDA error", r"\b(?P<what>unhandled CUDA error)\b"),  # an NCCL-compatible library's
    # a CUDA (or HIP) runtime call that failed, with cudaGetErrorString after it: NCCL's transports ("%s failed : %s",
    # p2p.cc's cudaIpcGetMemHandle; RCCL's hipified hipIpcGetMemHandle); the glog CHECK of MXNet, BytePS and other
    # dmlc code (CUDA_CALL: CHECK(e == cudaSuccess || e == cudaErrorCudartUnloading) << "CUDA: " << cudaGetErrorString(e))
    ("cuda.oom", ORG, "out of memory", r"\b(?:cuda|hip)[A-Z]\w*(?:\(\))? failed ?: out of memory"),
    ("cuda.error", ORG, " failed", r"\b(?P<call>(?:cuda|hip)[A-Z]\w*)(?:\(\))? failed ?: (?P<what>[^\n]+)"),
    ("cuda.oom", ORG, "CUDA: out of memory", r"== cudaSuccess\b.*?\bCUDA: out of memory"),
    ("cuda.error", ORG, "CUDA: ", r"== cudaSuccess\b.*?\bCUDA: (?P<what>[^\n]+)"),
    # cudaGetErrorString's own words for a kernel's fault, wherever a wrapper put them (NCCL 1's "Faild to clear dev
    # map: %s", a framework's message): no other library says them
    (
        "cuda.error",
        ORG,
        " was encountered",
        r"\b(?P<what>an illegal (?:memory access|instruction) was encountered|uncorrectable ECC error encountered)",
    ),
    ("nccl.error", S, "network error", r"\bNCCL\b.*?[:,] (?P<what>remote process exited or there was a network error)"),
    # the advice Ray's memory monitor appends when it killed a task or worker (src/ray/raylet/worker_killing_policy,
    # node_manager.cc): "Refer to the documentation on how to address the out of memory issue:
    # https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. ..." (read by the last resort's pass)
    ("host.oom", ORG, "ray-oom-prevention", r"address the out of memory issue: \S*ray-oom-prevention"),
    # Ray's memory monitor (src/ray/raylet/node_manager.cc): "%d Workers (tasks / actors) killed due to memory
    # pressure (OOM), %d Workers crashed due to other reasons at node ..."
    (
        "host.oom",
        ORG,
        "killed due to memory pressure",
        r"(?P<n>\d+) Workers? \(tasks / actors\) killed due to memory pressure",
    ),
    # Huawei CANN's device error report on Ascend NPUs (EI9999 "Inner Error!"): "The error from device(chipId:%u, dieId:%u),
    # serial number is %u, hccl [fftsplus ]task timeout occurred during task execution, stream_id:..., stuck notify
    # num:%u, timeout:%umin(default)": an HCCL collective's task waited out HCCL_EXEC_TIMEOUT for its peers' notify, as
    # NCCL's watchdog times out a collective
    (
        "coll.watchdog_timeout",
        S,
        "task timeout occurred",
        r"\bhccl (?:fftsplus )?task timeout occurred during task execution",
    ),
    # SGLang's scheduler watchdog (python/sglang/srt/managers/scheduler.py watchdog_thread): f"Scheduler watchdog timeout
    # ({self.watchdog_timeout=}, {self.soft=})", older f"Watchdog timeout ({self.watchdog_timeout=})": the forward batch
    # made no progress for that long (every tensor-parallel scheduler runs the same collectives), then it kills the server
    (
        "coll.watchdog_timeout",
        S,
        "atchdog timeout (self.watchdog_timeout=",
        r"\b[Ww]atchdog timeout \(self\.watchdog_timeout=(?P<timeout>[\d.]+)",
    ),
    # XLA on TPU (the TPU runtime via tpu_execute_op.cc, and XRT's xla_util.cc relaying it): "RESOURCE_EXHAUSTED:
    # Attempting to reserve %s at the bottom of memory. That was not possible. There are %s free, ...": the device's
    # HBM is out of memory, as CUDA's out of memory is on a GPU
    ("cuda.oom", ORG, "RESOURCE_EXHAUSTED", r"RESOURCE_EXHAUSTED: Attempting to reserve \S+ at the bottom of memory"),
    # XLA's TPU compiler when the program's buffers do not fit (its memory-space assignment): "RESOURCE_EXHAUSTED: XLA:TPU
    # compile permanent error. Ran out of memory in memory space hbm. Used %s of %s hbm. Exceeded hbm capacity by %s."
    # (then its allocation report): out of device memory, found at compile time before any step ran
    ("cuda.oom", ORG, "Ran out of memory in memory space", r"Ran out of memory in memory space (?P<space>\w+)\."),
    # the TPU allocator's other refusal, "Attempting to allocate %s. That was not possible. There are %s free.", behind
    # XLA's status code (PJRT: "RESOURCE_EXHAUSTED: Error allocating device buffer: ...") or XRT/TF 1.x's status text
    # ("(1) Resource exhausted: ..."): the device's HBM is full
    (
        "cuda.oom",
        ORG,
        "That was not possible",
        r"(?:RESOURCE_EXHAUSTED|Resource exhausted): (?:Error allocating device buffer: )?Attempting to (?:allocate|"
        r"reserve) (?P<size>\S+?)\.? That was not possible",
    ),
    # NCCL 1.x src/core.cu: WARN("failed to allocate %lu byte device buffer", ...), WARN("rank %d failed to allocate
    # device buffer", rank), then "NCCL Init failed (10) 'cuda malloc failed'": the device's memory ran out at init (the
    # rank is its communicator's, not named here: a sub-communicator numbers its own)
    ("cuda.oom", ORG, "failed to allocate", r"failed to allocate (?:\d+ byte )?device buffer\b"),
    # Rust's standard allocator's error hook (library/std/src/alloc.rs default_alloc_error_hook: "memory allocation of
    # {} bytes failed", then abort): a Rust extension (tokenizers, safetensors) in a process whose host ran out of memory
    ("host.oom", ORG, "memory allocation of ", r"memory allocation of (?P<bytes>\d+) bytes failed"),
    # DeepSpeed's transformer kernels (csrc/transformer/cublas_wrappers.cu): fprintf(stderr, "!!!! kernel execution
    # error. (m: %d, n: %d, k: %d, error: %d) \n", ..., (int)status), a cublasStatus_t (13: EXECUTION_FAILED)
    (
        "cuda.error",
        ORG,
        "kernel execution error",
        r"!!!! kernel execution error\. \(m: \d+, n: \d+, k: \d+, error: (?P<code>\d+)\)",
    ),
    # THC (PyTorch <= 1.10) THCGeneral.cpp __THCudaCheck: _THError(file, line, "cuda runtime error (%d) : %s", err,
    # cudaGetErrorString(err)), with " at %s:%d" appended: error 2 (cudaErrorMemoryAllocation) is out of memory
    ("cuda.oom", ORG, "cuda runtime error (2)", r"cuda runtime error \(2\) : out of memory"),
    (
        "cuda.error",
        ORG,
        "cuda runtime error (",
        r"cuda runtime error \((?P<code>\d+)\) : (?P<what>.+?)(?: at \S+:\d+)?$",
    ),
    # compute-sanitizer / cuda-memcheck (its API error report): "========= Program hit %s (error %d) due to \"%s\" on CUDA
    # API call to %s.": the runtime call that failed, as c10's CUDA check would have raised it
    (
        "cuda.error",
        ORG,
        "Program hit cudaError",
        r"Program hit (?P<code>cudaError\w+) \(error \d+\) due to \"(?P<what>[^\"]+)\"",
    ),
    # THC's check where it may not throw (THCGeneral.cpp __THCudaCheckWarn, PyTorch <= 1.10): fprintf(stderr,
    # "THCudaCheck FAIL file=%s line=%i error=%i : %s\n", file, line, err, cudaGetErrorString(err))
    ("cuda.oom", ORG, "THCudaCheck FAIL", r"THCudaCheck FAIL file=\S+ line=\d+ error=2 : out of memory"),
    ("cuda.error", ORG, "THCudaCheck FAIL", r"THCudaCheck FAIL file=\S+ line=\d+ error=(?P<code>\d+) : (?P<what>.+)"),
    # NCCL's check macros in its tests and benchmarks: nccl-tests' NCCLCHECK printf("NCCL failure %s:%d '%s'\n",
    # __FILE__, __LINE__, ncclGetErrorString(r)); DeepBench's "NCCL failure: " + ncclGetErrorString(r) + " in %s at
    # line: %d rank: %d" (the rank that failed, not the one that caused it)
    (
        "nccl.error",
        S,
        "NCCL failure",
        r"NCCL failure(?: \S+:\d+ '|: )(?P<what>unhandled (?:system|cuda) error|internal error|"
        r"invalid (?:argument|usage)|remote process exited or there was a network error)",
    ),
    # NCCL src/init.cc ncclCommInitRank: WARN("Invalid rank requested : %d/%d", myrank, nranks), then ncclInvalidArgument:
    # a process asked for a rank outside the communicator's size (more processes started than the world size said)
    ("nccl.error", S, "Invalid rank requested", r"Invalid rank requested : (?P<asked>\d+)/(?P<nranks>\d+)"),
    # NVSHMEM's IBGDA transport (src/modules/transport/ibgda/ibgda.cpp): NVSHMEMI_ERROR_PRINT("Error in
    # mlx5dv_devx_obj_modify for INIT2RTR_QP with syndrome %x\n", ...): an rdma-core call that moves a queue pair to
    # its next state failed, as NCCL's IB transport's system errors (DeepEP's internode kernels run over it)
    (
        "nccl.syscall_failed",
        S,
        "with syndrome",
        r"Error in (?P<call>mlx5dv_\w+) for (?P<err>\w+) with syndrome",
    ),
    # PSM3 / PSM2 (the Intel/Cornelis fabric layer under Intel MPI and oneCCL's OFI transport), ptl_am/ptl.c:
    # psmi_assert_always(nbytes == req->req_data.recv_msglen): a message arrived with another length than the receive
    # posted for it, the two ends disagree on the collective
    (
        "nccl.size_mismatch",
        ORG,
        "recv_msglen",
        r"Assertion failure at \S*psm\d?/\S+: nbytes == req->req_data\.recv_msglen",
    ),
    # DeepSpeed's per-node launcher (deepspeed/launcher/launch.py sigkill_handler): logger.info(f"Killing subprocess
    # {process.pid}") for every local process, after one of them exited with an error (or the launcher was signalled)
    (
        "agent.child_failed",
        Role.SUMMARY,
        "Killing subprocess",
        r"(?P<deepspeed>sigkill_handler)\] Killing subprocess \d+",
    ),
    # NCCL's documentation examples' NCCLCHECK (docs/examples): printf("Failed, NCCL error %s:%d '%s'\n", __FILE__,
    # __LINE__, ncclGetErrorString(r)), copied into many programs
    (
        "nccl.error",
        S,
        "NCCL error ",
        r"Failed, NCCL error \S+:\d+ '(?P<what>unhandled (?:system|cuda) error|internal error|invalid (?:argument|usage)|"
        r"remote process exited or there was a network error)'",
    ),
    # ROCr (ROCR-Runtime core/runtime/runtime.cpp, its memory fault handler): "Memory access fault by GPU node-%u (Agent
    # handle: %p) on address %p%s. Reason: %s." then abort: the HIP counterpart of CUDA's illegal memory access (the
    # node is an HSA agent's number, the CPU being node 0: neither a rank nor a host)
    (
        "cuda.error",
        ORG,
        "Memory access fault by GPU",
        r"(?P<what>Memory access fault) by GPU node-\d+ \(Agent handle: \w+\) on address \w+",
    ),
    # nccl-tests' CUDACHECK: printf("%s: Test CUDA failure %s:%d '%s'\n", hostname, __FILE__, __LINE__,
    # cudaGetErrorString(err))
    ("cuda.error", ORG, "CUDA failure", r"Test CUDA failure \S+:\d+ '(?P<what>[^']+)'"),
    # TensorFlow's NCCL manager (tensorflow/core/nccl/nccl_manager.cc): errors::Unknown("Error invoking NCCL: ",
    # ncclGetErrorString(nccl_result)), as its executor and collective ops re-print it
    ("nccl.error", S, "Error invoking NCCL", r"Error invoking NCCL: (?P<what>[a-z][a-z ]+[a-z])"),
    # onnxruntime (onnxruntime/core/providers/cuda/cuda_call.cc CudaCall): "%s failure %d: %s ; GPU=%d ; hostname=%s ;
    # expr=%s; %s" with the library's name (CUDA, NCCL, CUDNN, CUBLAS, ...) and its error string: the GPU and host too
    (
        "cuda.oom",
        ORG,
        " ; GPU=",
        r"CUDA failure 2: out of memory ; GPU=(?P<gpu>\d+) ; hostname=(?P<host>[^\s;]+)",
    ),
    (
        "nccl.error",
        S,
        " ; GPU=",
        r"NCCL failure (?P<retcode>\d+): (?P<what>[^;]+?) ; GPU=(?P<gpu>\d+) ; hostname=(?P<host>[^\s;]+)"
        r"(?: ; expr=(?P<expr>\w+))?",
    ),
    (
        "cuda.error",
        ORG,
        " ; GPU=",
        r"(?:CUDA|CUDNN|CUBLAS|CUFFT|CURAND|CUSPARSE) failure (?P<code>\d+): (?P<what>[^;]+?) ; GPU=(?P<gpu>\d+) ; "
        r"hostname=(?P<host>[^\s;]+)",
    ),
    # the custom all-reduce kernels of vLLM and SGLang (csrc/custom_all_reduce.cuh CUDACHECK): printf("Failed: Cuda error
    # %s:%d '%s'\n", __FILE__, __LINE__, cudaGetErrorString(e))
    ("cuda.error", ORG, "Failed: Cuda error", r"Failed: Cuda error \S+:\d+ '(?P<what>[^']+)'"),
    # torch's symmetric memory (c10d/symm_mem/CUDASymmetricMemory.cu rendezvous, vLLM's and SGLang's custom all-reduce):
    # TORCH_CHECK(..., "CUDASymmetricMemoryAllocator::rendezvous: detected allocations from overlapping devices from
    # different ranks."): two ranks of the group on one GPU, as NCCL's duplicate-GPU check finds; which ranks, not said
    (
        "cuda.shared_device",
        ORG,
        "overlapping devices",
        r"(?P<what>detected allocations from overlapping devices from different ranks)",
    ),
    # a device-side assertion (ATen's CUDA_KERNEL_ASSERT, the device's __assert_fail): "%s:%d: %s: block: [%d,%d,%d],
    # thread: [%d,%d,%d] Assertion `%s` failed." for every failing thread: the CUDA context is then poisoned
    (
        "cuda.error",
        ORG,
        "Assertion `",
        r"\.cuh?:\d+: .*?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] (?P<what>Assertion `.*` failed)",
    ),
    # c10 CUDAGuardImpl / CUDAFunctions: TORCH_WARN("CUDA warning: ", cudaGetErrorString(err)) where a destructor
    # may not throw: the same CUDA failure as "CUDA error: ..." (a device-side assert poisons the context)
    (
        "cuda.error",
        ORG,
        "CUDA warning: ",
        r"CUDA warning: (?P<what>device-side assert triggered|an illegal memory access "
        r"was encountered|unspecified launch failure|misaligned address)",
    ),
    # JAX's coordination service (openxla/xla xla/tsl/distributed_runtime/coordination/coordination_service.cc): an
    # expired barrier, absl::StrFormat("Barrier timed out. Id: %s. This usually happens because a task triggered the
    # barrier too early or too slowly. ...\n# of tasks that reached the barrier: %d/%d.\nThe first task at the barrier:
    # %s. Some timed out task names:\n%s", ...) with one "/job:jax_worker/replica:0/task:N" line per pending task (up to
    # kPendingTaskLogLimit); older releases: "Barrier timed out. Barrier_id: %s. Timed out task names:\n%s". The task
    # is JAX's process_id. Cluster registration is the barrier "[Init]Wait_for_all_tasks_to_register", after which the
    # service logs "Stopping coordination service as cluster registration failed. ..." (the tasks that never connected)
    (
        "jax.barrier_timeout",
        S,
        "Barrier timed out",
        r"Barrier timed out\. (?:Barrier_id|Id): (?P<barrier>\S+?)\.?(?:\s|$)",
    ),
    ("jax.barrier_timeout", S, "cluster registration failed", r"(?P<register>cluster registration failed)"),
    # the task's own side of it (xla/pjrt/distributed/client.cc): LOG(ERROR) << "Coordination service agent in error
    # status: " << status, DEADLINE_EXCEEDED where its registration or a barrier expired
    (
        "jax.barrier_timeout",
        S,
        "Coordination service agent in error status",
        r"Coordination service agent in error status: (?P<status>DEADLINE_EXCEEDED)",
    ),
    # a task the service stopped hearing from (coordination_service.cc: absl::UnavailableError(absl::StrCat("Task ",
    # task_name, " heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed
    # unexpectedly. ...")), logged as "... has been set to ERROR in coordination service" and relayed to every task
    ("jax.heartbeat", S, "heartbeat timeout", r"Task /job:[^/\s]+/replica:\d+/task:(?P<task>\d+) heartbeat timeout"),
    # a key the task waited for in the coordination service's key-value store (coordination_service_agent.cc:
    # absl::DeadlineExceededError(absl::StrCat("GetKeyValue() timed out with key: ", key, " and duration: ", ...)), e.g.
    # an NCCL clique's id that its root never published): a store-key wait, its writer not named by the key
    ("rdzv.wait_keys", S, "GetKeyValue() timed out", r"(?P<xla>GetKeyValue\(\) timed out) with key: "),
    # accelerate's state (huggingface/accelerate src/accelerate/state.py PartialState.__repr__, printed by scripts as
    # logger.info(accelerator.state)): "Num processes: %d\nProcess index: %d\nLocal process index: %d\nDevice: %s"; the
    # two lines before this one are read in filescan (a process's device: several on one GPU is a duplicate-GPU set)
    ("accel.state", Role.FACT, "Device: cuda:", r"^Device: (?P<device>cuda:\d+)\s*$"),
    # Lightning (lightning_fabric/strategies/launchers/subprocess_script.py _ChildProcessObserver): rank_prefixed_message(
    # f"Child process with PID {proc.pid} terminated with code {proc.returncode}. Forcefully terminating all other
    # processes to avoid zombies", rank=(i + 1)): the first child the main process (rank 0) saw exit non-zero, its rank
    # in Lightning's "[rank: N] " prefix
    (
        "agent.child_failed",
        Role.SUMMARY,
        "Child process with PID",
        r"(?P<lightning>Child process) with PID (?P<pid>\d+) terminated with code (?P<exit>-?\d+)",
    ),
    # the CUDA driver API's CUresult as libraries print it ("CUresult error result=1 ...", "CUDA_ERROR_ILLEGAL_ADDRESS")
    ("cuda.error", ORG, "CUresult error", r"CUresult error\s+result=(?P<what>\d+)"),
    # a CUDA runtime call's failure as libraries report it: "<cudaCall> failed: " + cudaGetErrorString(err)
    # (Horovod's "cudaEventQuery failed: an illegal memory access was encountered")
    (
        "cuda.error",
        ORG,
        " failed: ",
        r"\bcuda[A-Z]\w* failed: (?P<what>an illegal memory access was encountered|unspecified launch failure|"
        r"device-side assert triggered|misaligned address|an illegal instruction was encountered)",
    ),
)

# What NCCL and PyTorch print for each ncclResult_t, and the corpus class it belongs to
NCCL_CLASS: tuple[tuple[str, str], ...] = (
    ("remote process exited or there was a network error", "remote"),  # ncclGetErrorString(ncclRemoteError)
    ("ncclRemoteError", "remote"),
    ("unhandled system error", "system"),  # ncclSystemError
    ("ncclSystemError", "system"),
    ("internal error", "internal"),  # ncclInternalError ("Internal check failed")
    ("ncclInternalError", "internal"),
    # enqueue.cc getAlgoInfo (2.x; "... for function %s with datatype %s" in 2.2x): WARN("Error : no algorithm/protocol
    # available") then return ncclInternalError: NCCL_ALGO/NCCL_PROTO left no choice for this collective
    ("no algorithm/protocol available", "internal"),
    ("local catastrophic error", "system"),  # an IB async event of this host's own HCA (ibv_event_type_str)
    ("work queue error", "system"),
    ("Failed to initialize the HCCP process", "system"),  # CANN EJ0001: HCCL's counterpart of an init system error
    ("work queue catastrophic error", "system"),
    ("Unable to load NCCL library", "system"),  # XLA's NCCL stub: the library was not found or failed to load
    ("invalid usage", "usage"),  # ncclInvalidUsage
    ("ncclInvalidUsage", "usage"),
    ("invalid argument", "argument"),
    ("ncclInvalidArgument", "argument"),
)
RETCODE = {2: "system", 3: "internal", 4: "argument", 5: "usage", 6: "remote"}
KIND_CLASS = {
    "nccl.peer_closed": "remote",
    "nccl.peer_io": "remote",
    "nccl.ib_error": "remote",
    "nccl.proxy_closed": "remote",
    "nccl.connect_failed": "system",
    "nccl.syscall_failed": "system",
}
# ncclInvalidUsage where nothing more specific is said: what NCCL returns after its duplicate-GPU check (init.cc), two
# ranks of one communicator on one device (more processes than visible GPUs), by far its most common cause at init
NCCL_VOCAB = {"remote": "nccl_remote_error", "system": "nccl_system_error", "internal": "nccl_system_error",
         "argument": "nccl_system_error", "usage": "nccl_init_duplicate_gpu"}  # fmt: skip
LOOPBACK = re.compile(r"^(?:127\.\d+\.\d+\.\d+|::1|localhost|0\.0\.0\.0)$")


def nccl_class(kind: str, data: dict[str, object], text: str) -> tuple[str, bool] | None:
    """(remote | system | internal | usage, explicit) for an NCCL event, or None when it does not
    say. Explicit: NCCL's own result (retcode, ``ncclSystemError``, PyTorch's error string, or the start of one
    that an excerpt cut mid-word, where only one fits); the others are what the message family usually returns."""
    if "retcode" in data:
        cls = RETCODE.get(int(str(data["retcode"])))
        return (cls, True) if cls else None
    for phrase, cls in NCCL_CLASS:
        if phrase in text:
            return cls, True
    cut = {cls for phrase, cls in NCCL_CLASS for k in range(11, len(phrase)) if text.endswith(phrase[:k])}
    if len(cut) == 1:
        return cut.pop(), True
    if kind == "nccl.connect_failed" and "reset by peer" in text:
        return "remote", False  # the peer side closed the socket
    if kind == "nccl.peer_io" and "Connection refused" in text:
        return "system", False  # a non-blocking connect's refusal, seen at the first recv or send: a connect failure
    if kind in KIND_CLASS:
        return KIND_CLASS[kind], False
    return None


def nccl_vocab(classes: list[tuple[str, bool]]) -> str:
    """The corpus class of NCCL errors in log order: a remote result anywhere wins (the internal or
    system errors of the other ranks echo it), else the first system/usage result NCCL states;
    "internal error" is NCCL's catch-all (older releases wrap a closed peer in it), so the usual
    result of the message family underneath decides before it."""
    explicit = [c for c, sure in classes if sure]
    if "remote" in explicit:
        return NCCL_VOCAB["remote"]
    for c in explicit:
        if c != "internal":
            return NCCL_VOCAB[c]
    guessed = [c for c, sure in classes if not sure]
    return NCCL_VOCAB[guessed[0]] if guessed else NCCL_VOCAB["internal" if explicit else "remote"]


_HVD = re.compile(r"\[(missing|ready) ranks: ([\d, ]+)\]")
INFO_KINDS = frozenset({"misc.nccl_version", "accel.state"})  # recognised lines that are not errors


NCCL_RESULTS = {"1": "unhandled cuda error", "2": "unhandled system error", "3": "internal error"}  # ncclGetErrorString


def enrich(kind: str, text: str, data: dict[str, object]) -> None:
    """Fields that need the whole line: every tensor's rank list of a Horovod stall line (pastes
    glue dozens of them into one line); mpirun's exit as torchrun would report it (-signal)."""
    if kind == "agent.child_failed" and "exit with status code" in text:  # horovodrun's gloo launcher, per process
        data["launcher"], data["each"] = "horovodrun", "1"
    if kind == "agent.child_failed" and "trainer process with rank=" in text:  # Paddle's launcher: exit codes not given
        data["exit"], data["launcher"], data["nonzero"] = "1", "paddle", "1"
    if kind == "agent.child_failed" and "deepspeed" in data:  # DeepSpeed's launcher killing its processes: none named
        data["exit"], data["launcher"], data["nonzero"] = "1", "deepspeed", "1"
    if kind == "nccl.error" and "hccl" in data:  # HcclResult: 21 an error completion (remote), 4 internal, else system
        data["retcode"] = {"21": "6", "4": "3"}.get(str(data["hccl"]), "2")
    if kind == "nccl.error" and "nranks" in data:  # "Invalid rank requested": ncclInvalidArgument
        data["retcode"] = "4"
    if kind == "agent.child_failed" and "ray" in data:  # Ray's raylet: a worker died, its exit code not given
        data["exit"], data["launcher"], data["nonzero"] = "1", "ray", "1"
    if kind == "agent.child_failed" and "exit" not in data:  # mpirun: a signal's number, or "non-zero" alone
        data["exit"] = str(-int(str(data["signum"]))) if "signum" in data else "1"
        data["launcher"] = "mpirun"
    if kind == "nccl.error" and "retcode" in data and "what" not in data:  # ncclResult_t's number alone
        data["what"] = NCCL_RESULTS.get(str(data["retcode"]), "")
    if kind == "hvd.stall":
        sets = {f"{w}:{','.join(sorted(r.replace(' ', '').split(','), key=int))}" for w, r in _HVD.findall(text)}
        data["sets"] = "|".join(sorted(sets)[:32])


# Lines that report an error but match no family: kept (a few per rank) for the "unrecognised
# failure" finding, never used to attribute.
# Also aborts, exceptions and timeouts in words ("worker timeout reached", "exception in thread"), not a setting's name ("timeout=20",
# "'timeout': 900", "--timeout", "join_timeout").
UNKNOWN_ERROR = re.compile(
    r"(?:\b\w*(?:Error|Exception)\b|\bERROR\b|\bFATAL\b|\b[Ee]rror\b|\b(?:[Ee]xception|EXCEPTION)\b|NCCL WARN|\b(?:[Ff]ailed|FAILED)\b"
    r"|\b(?:[Aa]bort(?:ed|ing)?|ABORT(?:ED)?)\b|\b[Tt]imed out\b|(?<![\w=.'\"-])(?:[Tt]ime ?out|TIMEOUT)(?![\w='\":]))"
)
NOT_AN_ERROR = (
    "warnings.warn",
    "Warning:",
    "UserWarning",
    "FutureWarning",
    "DeprecationWarning",
    "deprecated",
    "NCCL INFO",
)
