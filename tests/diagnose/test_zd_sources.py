"""What the blind set zd (tests/corpus/diagnose/heldout-zd.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- NCCL's duplicate-GPU check (init.cc: "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx"): its
  ranks are its communicator's; a bare line (nothing else in the log says whose) names them with low confidence only;
- NCCL 2.21+'s socketPollConnect: WARN("socketPollConnect: connect returned %s, exceeded error retry count (%d)") and
  its "-> 6" trail: it never connected (a system failure), although the code is ncclRemoteError;
- PyTorch/XLA's mesh client (mesh_service.cc): XLA_CHECK(impl_->channel->WaitForConnected(...)) << "Failed to connect to
  client mesh master: " << address;
- Intel oneCCL: "|CCL_ERROR| %s:%d %s: %s" and torch-ccl's "oneCCL: %s:%d %s: EXCEPTION: %s".
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

DUP = "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 50\n"


def test_a_bare_duplicate_gpu_line_names_its_pair_with_low_confidence(tmp_path: Path) -> None:
    got = verdict(tmp_path, DUP)
    assert (got.klass, got.ranks, got.confidence) == ("nccl_init_duplicate_gpu", [0, 1], "low")
    got = verdict(tmp_path, "[rank1]: " + DUP.replace("Duplicate", "NCCL WARN Duplicate"))  # its reporter is rank 1
    assert (got.ranks, got.confidence) == ([0, 1], "high")


def test_a_connect_that_never_succeeded_is_a_system_failure(tmp_path: Path) -> None:
    warn = (
        "host-a:1183664:1184669 [0] misc/socket.cc:544 NCCL WARN socketPollConnect: connect returned No route to host, "
        "exceeded error retry count (35)\n"
    )
    trail = "".join(
        f"host-a:1183664:1184669 [0] NCCL INFO {w} -> 6\n" for w in ("misc/socket.cc:635", "bootstrap.cc:605")
    )
    assert verdict(tmp_path, trail)[0] == "nccl_remote_error"
    assert verdict(tmp_path, warn + trail)[0] == "nccl_system_error"
    other = trail.replace("host-a:1183664", "host-b:2000")  # another process's remote result: a peer went away there
    assert verdict(tmp_path, warn + trail + other)[0] == "nccl_remote_error"


def test_xlas_mesh_client_that_never_reached_its_master(tmp_path: Path) -> None:
    check = (
        "RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:316 : Check failed: impl_->channel->"
        "WaitForConnected( std::chrono::system_clock::now() + std::chrono::seconds(connect_wait_seconds))\n"
    )
    master = "Failed to connect to client mesh master: worker-0.internal:38973\n"
    assert verdict(tmp_path, check + master)[:2] == ("rendezvous_timeout", [])
    assert verdict(tmp_path, master)[:2] == ("rendezvous_timeout", [])  # the last resort's pass finds it alone


def test_oneccls_own_errors(tmp_path: Path) -> None:
    ccl = (
        "2023:11:28-16:35:45:(35980) |CCL_ERROR| base_thread.cpp:36 start: error while creating worker thread #0 "
        "pthread_create returns 22\n"
        "RuntimeError: oneCCL: exec.cpp:134 start_workers: EXCEPTION: failed to start worker # 0\n"
    )
    assert verdict(tmp_path, ccl)[:2] == ("nccl_system_error", [])
    crash = (
        "[node-1:168955:0:168955] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)\n"
    )
    assert verdict(tmp_path, ccl + crash)[0] == "nccl_system_error"  # the crash after it is its echo
