"""What the blind sets za and zb (tests/corpus/diagnose/heldout-za.md, heldout-zb.md) showed was not read, each written
from its source's own format string, not from the sets' cases (the logs below are built from those strings):

- a paste quoted in Markdown before a pdsh host tag or NCCL's own "host:pid:tid [dev]" prefix, nested quotes, a host
  tag without a hyphen before NCCL's prefix, and a rich-text editor's autolinks ("[net_ib.cc:101](http://net_ib.cc:101/)");
- NCCL's IB async events (net_ib.cc WARN("NET/IB : %s:%d Got async event : %s", ..., ibv_event_type_str(...))) that name
  this host's own failure, against a peer's completion error;
- JAX/XLA's coordination service: "Coordination service agent in error status: " << status (client.cc) and
  "GetKeyValue() timed out with key: " key " and duration: " (coordination_service_agent.cc);
- Ray's raylet: "A worker died or was killed while executing a task by an unexpected system error. ...";
- Ascend HCCL's listen failure (hccl_socket.cc): "%s socket type[%u], listen on ip[%s] and specific port[%u] fail. ...";
- TensorFlow's NCCL manager: errors::Unknown("Error invoking NCCL: ", ncclGetErrorString(r));
- onnxruntime's CudaCall: "%s failure %d: %s ; GPU=%d ; hostname=%s ; expr=%s; %s";
- c10d's per-address bind failure "The server socket has failed to bind to {} (errno: {} - {})." wrapped after "(errno:";
- OpenSSH's "ssh: connect to host %s port %s: %s", its exit status 255 in subprocess's "Command '%s' returned non-zero
  exit status %d.", and DeepSpeed's runner "... but host={} was not reachable via ssh.";
- nccl-tests' CUDACHECK "%s: Test CUDA failure %s:%d '%s'", and a CUDA device assertion "%s:%d: %s: block: [%d,%d,%d],
  thread: [%d,%d,%d] Assertion `%s` failed.".
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

LOST = (
    "node-b:10214:10303 [0] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion from peer 10.1.3.201<33057> with "
    "status=9 opcode=0 len=0 vendor err 138 (Send)\n"
    "node-b:10214:10303 [0] NCCL INFO transport/net.cc:1137 -> 6\n"
)


def local(event: str, host: str = "node-a") -> str:
    return f"{host}:127799:127863 [0] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_0:1 Got async event : {event}\n"


def test_an_hcas_own_async_error_is_the_cause_of_its_peers_lost_completion(tmp_path: Path) -> None:
    assert verdict(tmp_path, LOST)[0] == "nccl_remote_error"
    got = verdict(tmp_path, local("local access violation work queue error") + LOST)
    assert (got.klass, got.hosts) == ("nccl_system_error", ["node-a"])
    assert verdict(tmp_path, local("GID table change") + LOST)[0] == "nccl_remote_error"  # no failure


def test_quotes_links_and_bare_host_tags_before_ncclS_prefix(tmp_path: Path) -> None:
    quoted = "".join(f"> {line}\n" for line in (local("local catastrophic error") + LOST).splitlines())
    got = verdict(tmp_path, quoted)
    assert (got.klass, got.hosts) == ("nccl_system_error", ["node-a"])
    linked = quoted.replace("net_ib.cc:101", "[net_ib.cc:101](http://net_ib.cc:101/)").replace(
        "10.1.3.201<", "[10.1.3.201](http://10.1.3.201/)<"
    )
    assert verdict(tmp_path, linked)[:4:3] == got[:4:3]
    # pdsh's "node01: " (no hyphen) before NCCL's prefix, inside a quote; the completion error's own trail says -> 2 (its class)
    tagged = (
        "> node01: host-1:108:593 [0] transport/net_ib.cc:816 NCCL WARN NET/IB : Got completion with error 12, opcode 0, "
        "len 32633, vendor err 129\n> node01: host-1:108:593 [0] NCCL INFO transport/net.cc:295 -> 2\n"
    )
    assert verdict(tmp_path, tagged)[0] == "nccl_system_error"


def test_xlas_coordination_service_waits_are_rendezvous_timeouts(tmp_path: Path) -> None:
    agent = (
        "> 2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination service agent in "
        "error status: DEADLINE_EXCEEDED: Deadline Exceeded\n"
    )
    assert verdict(tmp_path, agent)[:2] == ("rendezvous_timeout", [])
    key = (
        "E0000 00:00:1743713172.513857  698835 pjrt_stream_executor_client.cc:3072] Execution of replica 0 failed: "
        "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: devices=[0,1,2,3]; stream=0; root_device=0 and duration: "
        "10m\n"
    )
    assert verdict(tmp_path, key)[:2] == ("rendezvous_timeout", [])


def test_rays_dead_worker_is_a_worker_failure(tmp_path: Path) -> None:
    died = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
        "problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: f8ab Node ID: 9c1d Worker IP address: "
        "192.168.111.204 Worker port: 10005 Worker PID: 1508038\n"
    )
    assert verdict(tmp_path, died)[:2] == ("child_failed_other", [])


def test_hccls_listen_failure_is_a_port_in_use_on_that_address(tmp_path: Path) -> None:
    line = (
        "[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] [2717288][HcclSocket][Listen] "
        "socket type[1], listen on ip[10.20.0.160%enp53s0f2] and specific port[16666] fail. Please check the port status "
        "and whether the port is being used by other process.\n"
    )
    got = verdict(tmp_path, line)
    assert (got.klass, got.hosts) == ("address_in_use", ["10.20.0.160"])


def test_other_stacks_words_for_ncclS_and_cudaS_errors(tmp_path: Path) -> None:
    tf = (
        "2023-03-03 13:12:24.938224: I tensorflow/core/common_runtime/executor.cc:1197] [/job:localhost/replica:0/task:0/"
        "device:GPU:2] (DEBUG INFO) Executor start aborting (this does not indicate an error and you can ignore this "
        "message): UNKNOWN: Error invoking NCCL: unhandled cuda error\n"
    )
    assert verdict(tmp_path, tf)[0] == "cuda_error"
    assert verdict(tmp_path, tf.replace("unhandled cuda error", "unhandled system error"))[0] == "nccl_system_error"
    tests = " Test CUDA failure common.cu:1045 'CUDA driver version is insufficient for CUDA runtime version'\n"
    assert verdict(tmp_path, tests)[0] == "cuda_error"
    asserted = "".join(
        f"/pytorch/aten/src/ATen/native/cuda/Loss.cu:102: operator(): block: [445,0,0], thread: [{t},0,0] Assertion "
        "`input_val >= zero && input_val <= one` failed.\n"
        for t in (20, 21)
    )
    assert verdict(tmp_path, asserted)[0] == "cuda_error"


def ort(lib: str, code: int, what: str, gpu: int, stamp: str) -> str:
    return (
        f"2020-11-24 20:31:45.{stamp} [E:onnxruntime:Default, cuda_call.cc:119 CudaCall] {lib} failure {code}: {what} ; "
        f"GPU={gpu} ; hostname=node-7 ; expr=ncclCommInitRank(group_comm, size, nccl_id, rank);\n"
    )


def test_onnxruntimes_cuda_calls_and_two_inits_on_one_gpu(tmp_path: Path) -> None:
    one = ort("NCCL", 5, "invalid usage", 0, "932376500")
    # invalid usage at init, where nothing says more: NCCL's duplicate-GPU refusal, its usual cause (held-out set zw)
    assert verdict(tmp_path, one)[0] == "nccl_init_duplicate_gpu"
    got = verdict(tmp_path, one + ort("NCCL", 5, "invalid usage", 0, "932376200"))
    assert (got.klass, got.ranks, got.hosts) == ("nccl_init_duplicate_gpu", [], ["node-7"])
    assert verdict(tmp_path, one + ort("NCCL", 5, "invalid usage", 1, "932376200"))[0] == "nccl_system_error"
    assert verdict(tmp_path, ort("CUDA", 2, "out of memory", 0, "1"))[0] == "oom"


def test_a_bind_failure_wrapped_after_its_errno(tmp_path: Path) -> None:
    text = (
        "RuntimeError: The server socket has failed to listen on any local network\n"
        "address. The server socket has failed to bind to [::]:29600 (errno: 98 - Address\n"
        "already in use). The server socket has failed to bind to 0.0.0.0:29600 (errno:\n"
        "98 - Address already in use).\n"
    )
    assert verdict(tmp_path, text)[0] == "address_in_use"


def test_a_launcher_that_cannot_reach_a_node_over_ssh(tmp_path: Path) -> None:
    call = (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.8/subprocess.py", line 512, in run\n'
        "    raise CalledProcessError(retcode, process.args,\n"
        "subprocess.CalledProcessError: Command '['ssh 10.0.0.9 hostname -I']' returned non-zero exit status 255.\n"
    )
    assert verdict(tmp_path, call)[:2] == ("connection_refused", [])  # ssh(1) exits 255 on its own error
    ssh = "ssh: connect to host 10.0.0.9 port 22: No route to host\n"
    assert verdict(tmp_path, ssh + call)[:2] == ("connection_refused", [])
    other = call.replace("ssh 10.0.0.9 hostname -I", "python train.py")  # another command's 255 is its own failure
    assert verdict(tmp_path, other)[0] == "child_failed_other"
    options = call.replace("ssh 10.0.0.9", "ssh -o PasswordAuthentication=no -p 2222 gpu-0011")
    assert verdict(tmp_path, options)[:2] == ("connection_refused", [])
    ds = (
        "RuntimeError: Using hostfile at /job/hostfile but host=gpu-0011 was not reachable via ssh. If you are running "
        "with a single node please remove /job/hostfile or setup passwordless ssh.\n"
    )
    assert verdict(tmp_path, ds)[:2] == ("connection_refused", [])
