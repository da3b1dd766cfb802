"""What the blind set zw (tests/corpus/diagnose/heldout-zw.md) showed was not read, written from each source's own
format, not from the set's cases (the logs below are built from it):

- ROCr's memory fault handler (ROCR-Runtime core/runtime/runtime.cpp): "Memory access fault by GPU node-%u (Agent
  handle: %p) on address %p%s. Reason: %s." — HIP's illegal memory access; the node is an HSA agent, not a host;
- XLA's TPU compiler: "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm.";
- EADDRINUSE in words on a line without "error" (ps-lite's ZeroMQ van: "Reached max retry for bind: Address already
  in use. errno = 98");
- OpenSSH's "%s@%s: Permission denied (%s)." and Open MPI's "ORTE was unable to reliably start one or more daemons.":
  the launcher cannot start anything on a node;
- NCCL's documentation examples' "Failed, NCCL error %s:%d '%s'";
- ncclInvalidUsage with nothing more specific: NCCL's duplicate-GPU refusal (unless the processes print different
  GPUs);
- mpirun's "The first process to do so was: [[J,1],R]" where the only error of one's own carries no rank."""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_rocr_memory_access_fault_is_a_cuda_class_error_with_no_rank_or_host(tmp_path: Path) -> None:
    log = (
        "Memory access fault by GPU node-4 (Agent handle: 0x55d0c2a1b2c0) on address 0x7f00dead0000. Reason: Page not "
        "present or supervisor privilege.\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks, got.hosts) == ("cuda_error", [], [])
    assert verdict(tmp_path, "Memory access fault: none seen\n").klass != "cuda_error"


def test_tpu_compile_out_of_hbm_is_oom(tmp_path: Path) -> None:
    log = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
        "in memory space hbm. Used 40.10G of 15.48G hbm. Exceeded hbm capacity by 24.62G.\n"
    )
    assert verdict(tmp_path, log).klass == "oom"
    vmem = log.replace("memory space hbm", "memory space vmem")
    assert verdict(tmp_path, vmem).klass == "oom"


def test_a_bind_that_gave_up_without_the_word_error(tmp_path: Path) -> None:
    log = "[10:01:02] src/./zmq_van.h:121: Reached max retry for bind: Address already in use. errno = 98\n"
    assert verdict(tmp_path, log).klass == "address_in_use"


def test_a_launcher_whose_ssh_login_is_refused_starts_nothing(tmp_path: Path) -> None:
    login = "mpiuser@worker-3.svc: Permission denied (publickey,gssapi-with-mic,password).\n"
    got = verdict(tmp_path, login)
    assert (got.klass, got.ranks) == ("connection_refused", [])
    orte = "ORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n"
    assert verdict(tmp_path, orte).klass == "connection_refused"
    # a file's permission, not a login
    assert verdict(tmp_path, "cp: cannot open '/data/x': Permission denied\n").klass != "connection_refused"


def test_ncclchecks_example_macro_and_bare_invalid_usage(tmp_path: Path) -> None:
    usage = "Failed, NCCL error main.cu:88 'invalid usage'\n"
    assert verdict(tmp_path, usage).klass == "nccl_init_duplicate_gpu"
    system = "Failed, NCCL error main.cu:88 'unhandled system error'\n"
    assert verdict(tmp_path, system).klass == "nccl_system_error"
    argument = "Failed, NCCL error main.cu:88 'invalid argument'\n"
    assert verdict(tmp_path, argument).klass == "nccl_system_error"  # not a shared GPU
    two = "".join(
        f"RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, invalid usage, NCCL version "
        f"2.7.8 (pid {p})\n"
        for p in (11, 12)
    )
    got = verdict(tmp_path, two)
    assert (got.klass, got.ranks) == ("nccl_init_duplicate_gpu", [])


def test_mpiruns_first_exit_owns_the_only_unranked_error(tmp_path: Path) -> None:
    banner = (
        "-" * 74 + "\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job "
        "to be terminated. The first process to do so was:\n\n  Process name: [[4242,1],3]\n  Exit code:    1\n"
        + "-" * 74
        + "\n"
    )
    one = "gpu-a: Test CUDA failure common.cu:732 'out of memory'\n"
    got = verdict(tmp_path, one + banner)
    assert (got.ranks, got.confidence) == ([3], "low")
    # two processes with errors of their own: mpirun's first exit does not say whose was first
    two = one + " .. gpu-b pid 77: Test CUDA failure common.cu:732 'invalid device ordinal'\n"
    assert verdict(tmp_path, two + banner).ranks == []
    assert verdict(tmp_path, one).ranks == []  # no launcher's word: nobody
