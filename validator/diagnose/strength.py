"""How strongly each kind of evidence names the failure that started a run's collapse.

Every rule that finds a candidate ``Cause`` gives it one of these levels; the verdict is the
strongest candidate (ties: the higher confidence, then the one found first). Only the order
matters, so a new rule takes the level of the evidence it is most like, or a new level between
two existing ones. Highest first: what the ranks did, recorded per call, beats what NCCL or the
store saw, which beats what a launcher or a timestamp suggests.
"""

from __future__ import annotations

# ---------------------------------------------------------------- recorded call histories
TRACE = 100  # rehearsal traces diverge: every rank's calls, recorded by the validator itself
DUPLICATE_GPU = 95  # NCCL names two ranks on one GPU: the communicator cannot form at all
FLIGHT_RECORDER = 90  # Flight Recorder dumps diverge: NCCL's own per-call record
NCCL_VERSIONS = 90  # NCCL names ranks with different versions: it refuses to form a communicator
NO_INTERFACE = 88  # NCCL/Gloo found no interface to use on a host: nothing else can work there
HISTORY_MISMATCH = 88  # a rank's logged collective history calls something else at a position
ADDRESS_IN_USE = 87  # the store or NCCL could not bind its port: the store never starts
LAUNCH_CONTRACT = 86  # ranks report their own broken launch (missing env://, invalid rank)
DESYNC_NEVER_JOINED = 85  # desync report or monitored barrier: these ranks never joined
STORE_WRONG_PORT = 84  # some ranks connect to the store at another port than the rest reached
HOROVOD_STALL = 84  # Horovod's stall report names the ranks that never submitted the tensors
DETAIL_MAJORITY = 80  # TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints: a majority against the odd ranks
HISTORY_MISSING = 80  # a rank's logged collective history lacks a call the others made
NCCL_MISMATCH_AROUND = 78  # NCCL's desync check points at ranks around the mismatch
NCCL_SIZE_MISMATCH = 77  # NCCL found a size mismatch with a named peer
STORE_BARRIER_MISSING = 76  # the store barrier of the default group names who never arrived
NEVER_JOINED = 75  # the process group's store names the ranks that never wrote their address
STORE_BARRIER_COUNT = 74  # a store barrier counts the arrivals, short of the world size
TRACE_EXCEPTION = 72  # a rehearsal trace ends in an exception on that rank
SSH_UNREACHABLE = 71  # the launcher could not reach a node over ssh: nothing of the job started there
EXCEPTION_HIGH = 70  # a rank raised (or crashed) first, and the time order is clear
HOROVOD_READY = 70  # Horovod lists the ready ranks; the missing ones follow from the world size
P2P_UNMATCHED = 66  # send/recv pairs counted per (sender, receiver) in rehearsal traces
TIMED_OUT_ELSEWHERE = 65  # some ranks timed out in another collective than the rest
DIFFERENT_WAITS = 64  # ranks waited in different collectives when the watchdog fired
STORE_UNREACHABLE = 62  # ranks could not reach the store: its host (rank 0) or their address is at fault
EXCEPTION_MEDIUM = 60  # a rank raised first, the time order less sure
DESYNC_NOT_FINISHED = 60  # desync report: these ranks joined but never finished
UNIQUE_ID = 60  # rank 0 never published NCCL's unique id while the others waited for it
SILENT_DIED = 60  # the ranks that did not report the timeout died of a signal
SILENT_NEVER_REPORTED = 59  # the ranks that did not report the timeout the others hit
SILENT_IN_TIMEOUT = 58  # ranks silent in the collective timeout the others report
NCCL_RAS = 57  # NCCL RAS lists ranks missing or at another operation count
SUMMARY_MISMATCH = 56  # the launcher summary's traceback reports mismatched collectives
MONITORED_BARRIER = 56  # ranks reached the monitored barrier but others did not
ROOT_CAUSE = 55  # torchrun's failure summary: the root cause of the earliest failing node
AGENT_SIGNAL = 52  # the launcher's agent reports a worker killed by a signal
ALL_ABORTED = 50  # every failing rank aborted at the same second: the watchdog's teardown
TIED_FAILURES = 50  # several failures in the same second and no summary orders them
RDZV_COUNT = 50  # the rendezvous counts who arrived; nothing names who did not
STOPPED_OUTSIDE = 48  # the scheduler or an outer timeout stopped the job
CCL_ERROR = 46  # Intel oneCCL reports its own failure (its workers or its transport did not start)
SPLIT = 45  # a recorded history split evenly at a collective: no majority to judge by
NCCL_CUDA = 45  # NCCL's own error names a CUDA failure on these ranks
NCCL_VERSIONS_IN_LOG = 44  # the log shows several NCCL versions, no rank named
REPORTED = 40  # the least a candidate needs to be listed beside the verdict or to corroborate it
NO_MAJORITY = 40  # ranks ran different collectives at one sequence number, no majority
EXCEPTION_LOW = 35  # a rank raised, but several did and nothing orders them
ALL_NAMED = 32  # a desync report names every rank it knows, so it names nobody
PARTIAL = 30  # half a report: one side, cut short, split evenly, or c10d's connect retries alone
CONNECTION_REFUSED = 27  # connections refused: a peer was not up yet, or is unreachable
NCCL_NET_ERROR = 25  # NCCL system/remote/network errors, no clearer cause elsewhere
TIMEOUT_ONLY = 20  # collective timeouts and nothing that failed differently
STORE_NO_REPLY = 19  # c10d's waitForInput warning alone: a store request that got no reply
EXIT_CODE_ONLY = 18  # a worker exited with a code, its own error not in the lines
CONNECT_RETRIES = 16  # NCCL retrying a connect, and no failure after it in the lines
EARLIEST_ERROR = 15  # the earliest error by timestamp: nothing else decides
UNRECOGNISED = 5  # errors that match no known family: quoted, never a culprit

EXCEPTION = {"high": EXCEPTION_HIGH, "medium": EXCEPTION_MEDIUM, "low": EXCEPTION_LOW, "unknown": EXCEPTION_LOW}
