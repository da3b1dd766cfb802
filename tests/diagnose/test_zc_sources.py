"""What the blind set zc (tests/corpus/diagnose/heldout-zc.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- vLLM's pynccl wrapper (vllm/distributed/device_communicators/pynccl_wrapper.py NCCL_CHECK): raise RuntimeError(
  f"NCCL error: {error_str}") with ncclGetErrorString, cut mid-word by an excerpt; its source line in a traceback whose
  header the excerpt lost is no message;
- c10d's TCPStore client: "[c10d] {op} failed on SocketImpl(fd=N, addr=..., remote=...): Broken pipe";
- c10d's "The client socket has timed out after {} while trying to connect to ({}, {})." behind a Ray actor's prefix, a
  paste's inline-code backtick, a terminal's wrap after the host;
- Ray's memory monitor advice ("Refer to the documentation on how to address the out of memory issue: ...
  ray-oom-prevention.html"), read by the last resort's pass;
- torch's symmetric memory: "CUDASymmetricMemoryAllocator::rendezvous: detected allocations from overlapping devices
  from different ranks.";
- the custom all-reduce kernels' CUDACHECK: printf("Failed: Cuda error %s:%d '%s'\\n", ...);
- nccl-tests' host before its checks: printf("%s: Test CUDA failure %s:%d '%s'\\n", hostname, ...).
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_a_pynccl_error_cut_mid_word_and_its_source_line(tmp_path: Path) -> None:
    frames = (
        '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/pynccl_wrapper.py"'
        ", line 223, in NCCL_CHECK\n"
        '[rank0]:     raise RuntimeError(f"NCCL error: {error_str}")\n'
    )
    assert verdict(tmp_path, frames + "[rank0]: RuntimeError: NCCL error: unhandled syst")[0] == "nccl_system_error"
    assert verdict(tmp_path, frames + "[rank0]: RuntimeError: NCCL error: remote process exi")[0] == "nccl_remote_error"
    assert verdict(tmp_path, frames)[0] == "none"  # the source line alone reports nothing


def test_a_store_connection_broken_under_the_client(tmp_path: Path) -> None:
    line = (
        "[rank1]:[W1229 22:06:38.558655037 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=67, "
        "addr=[bogon]:36214, remote=[bogon]:43145): Broken pipe\n"
    )
    assert verdict(tmp_path, line)[:2] == ("connection_refused", [])


def test_a_store_client_behind_a_ray_actor_names_no_rank_0(tmp_path: Path) -> None:
    client = (
        "[E socket.cpp:922] [c10d] The client socket has timed out after 1800s while trying to connect to (10.0.0.2, "
        "44737).\n"
    )
    assert verdict(tmp_path, client)[:2] == ("rendezvous_timeout", [0])  # env:// alone: rank 0 hosts the store
    ray = "`(RayWorkerVllm pid=207931, ip=10.0.1.75) " + client.replace("(10.0.0.2, ", "(10.0.0.2\n, ")
    watchdog = (
        "(ActorModelRayActor pid=207260, ip=10.0.1.75) [E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=3856, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
        "1800268 milliseconds before timing out.\n"
    )
    assert verdict(tmp_path, ray + watchdog)[:2] == ("rendezvous_timeout", [])


def test_other_words_for_oom_and_shared_or_broken_devices(tmp_path: Path) -> None:
    advice = (
        "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/"
        "scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task "
        "parallelism by requesting more CPUs per task.\n"
    )
    assert verdict(tmp_path, advice)[:2] == ("oom", [])
    symm = (
        "(EngineCore_DP0 pid=28191) RuntimeError: CUDASymmetricMemoryAllocator::rendezvous: detected allocations from "
        "overlapping devices from different ranks.\n"
    )
    assert verdict(tmp_path, symm)[:2] == ("nccl_init_duplicate_gpu", [])
    custom = (
        "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'peer access is not supported between these'\n"
    )
    assert verdict(tmp_path, custom)[0] == "cuda_error"
    tests = "test: Test CUDA failure common.cu:941 'system not yet initialized'\n .. test pid 54340: Test failure common.cu:891\n"
    got = verdict(tmp_path, tests)
    assert (got.klass, got.hosts) == ("cuda_error", ["test"])
