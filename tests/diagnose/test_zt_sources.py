"""What the blind set zt (tests/corpus/diagnose/heldout-zt.md) showed was not read, written from the sources' own
format strings, not from the set's cases (the logs below are built from them):

- LightGBM's socket network (src/network/linkers_socket.cpp, socket_wrapper.hpp): "Binding port %d failed" (also
  inside SynapseML's "Network init call failed in LightGBM with error: ..."), "Socket %s error, %s (code: %d)" and its
  older and Windows forms read by their errno, "Connecting to rank %d failed, waiting for %d milliseconds";
- gRPC's UNAVAILABLE "Socket closed", as TensorFlow raises it: a peer gone;
- horovodrun's "Timed out waiting for tasks to start" (util/timeout.py), also its raising frame alone: hosts that never
  registered;
- an exception class with an empty message ("ResourceExhaustedError:") says nothing of its own: what follows does;
- libstdc++'s "terminate called without an active exception" and Open MPI's "*** Process received signal ***" banner:
  a crash, the banner ranked below any error (its abort() may follow one), both naming the host that printed them;
- UCX's fatal report prefix "[%s:%-5d:%s:%d] " and Spark's "Lost task ... (%s executor %s): " name the host;
- a gloo key of a group other than the default one ("default_pg/0//7//cuda//pg_wrapper:7/0/1") names that group's
  rank, not the world's: nobody.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict


@pytest.mark.parametrize(
    ("log", "klass"),
    [
        ("[LightGBM] [Info] Trying to bind port 12400...\n[LightGBM] [Fatal] Binding port 12400 failed", "address_in_use"),
        ("[LightGBM] [Fatal] Socket recv error, Connection reset by peer (code: 104)", "connection_refused"),
        ("[LightGBM] [Fatal] Socket send error, code: 54", "connection_refused"),
        ("[LightGBM] [Fatal] Socket recv error (code: 10054)", "connection_refused"),
        ("[LightGBM] [Fatal] Socket accept error, Connection refused (code: 111)", "connection_refused"),
        ("[LightGBM] [Info] Listening...\n[LightGBM] [Warning] Connecting to rank 2 failed, waiting for 200 milliseconds",
         "connection_refused"),
        ("tensorflow.python.framework.errors_impl.UnavailableError: Socket closed", "connection_refused"),
        ("horovod.runner.common.util.timeout.TimeoutException: Timed out waiting for tasks to start. Please check "
         "connectivity between servers. You may need to increase the --start-timeout parameter if you have too many "
         "servers. Timeout after 30 seconds.", "rendezvous_timeout"),
        ('  File "/usr/lib/python3/site-packages/horovod/runner/common/service/driver_service.py", line 166, in '
         "wait_for_initial_registration\n    timeout.check_time_out_for('tasks to start')", "rendezvous_timeout"),
        ("ResourceExhaustedError:\n\nOut of memory error on GPU 1. Cannot allocate 2.000000GB memory on GPU 1, 30.1GB "
         "memory has been allocated and available memory is only 1.2GB.", "oom"),
        ("terminate called without an active exception\nAborted (core dumped)", "child_failed_other"),
    ],
)  # fmt: skip
def test_each_sources_own_words(tmp_path: Path, log: str, klass: str) -> None:
    assert verdict(tmp_path, log + "\n").klass == klass


def test_a_socket_error_of_another_errno_is_not_read_as_a_peer_gone(tmp_path: Path) -> None:
    assert verdict(tmp_path, "[LightGBM] [Fatal] Socket recv error, Bad file descriptor (code: 9)\n").klass != (
        "connection_refused"
    )


def test_open_mpis_signal_banner_names_its_host_and_ranks_below_an_error(tmp_path: Path) -> None:
    banner = "[gpu17:405884] *** Process received signal ***\n"
    got = verdict(tmp_path, "gpu17:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>\n" + banner)
    assert (got.klass, got.hosts) == ("child_failed_other", ["gpu17"])
    # an abort() after an NCCL failure of its own: the failure, not the signal that ended the process
    got = verdict(tmp_path, "gpu17: Test NCCL failure common.cu:951 'internal error / '\n" + banner)
    assert got.klass == "nccl_system_error"


def test_ucx_and_spark_prefixes_name_the_host(tmp_path: Path) -> None:
    got = verdict(tmp_path, "[gpu-3-17:288505:0:296459] Caught signal 11 (Segmentation fault: address not mapped to "
                            "object at address 0x48)\n")  # fmt: skip
    assert (got.klass, got.hosts) == ("child_failed_other", ["gpu-3-17"])
    for lost in ("(TID 17418) (node74.example executor 12)", "(TID 17418, node74.example, executor 12)"):
        log = (f"23/01/05 14:07:26 WARN TaskSetManager: Lost task 60.0 in stage 28.0 {lost}: java.lang.Exception: "
               "Network init call failed in LightGBM with error: Binding port 12412 failed\n")  # fmt: skip
        got = verdict(tmp_path, log)
        assert (got.klass, got.hosts) == ("address_in_use", ["node74.example"]), lost


def test_a_subgroups_store_key_names_no_rank_of_the_world(tmp_path: Path) -> None:
    key = "//worker/attempt_0/default_pg/0//7//cuda//pg_wrapper:7/0/1"
    got = verdict(tmp_path, f"[rank0]: torch.distributed.DistStoreError: wait timeout after 600000ms, keys: {key}\n")
    assert got.ranks == []
    # the default group's own key is the world's rank (gloo's connectFullMesh: its rank under the group's prefix)
    got = verdict(tmp_path, "[rank0]: torch.distributed.DistStoreError: wait timeout after 600000ms, keys: "
                            "//worker/attempt_0/default_pg/0//cpu//0/3\n")  # fmt: skip
    assert got.ranks == [3]
