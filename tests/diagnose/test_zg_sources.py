"""What the blind set zg (tests/corpus/diagnose-heldout/zg, then tests/corpus/diagnose/heldout-zg.md) showed was not
read, written from its sources' own format strings, not from the set's cases (the logs below are built from them):

- Open MPI's signal handler (opal/util/stacktrace.c): each line of its report starts HOSTFORMAT "[%s:%05d] " (the node
  and the pid), then "*** Process received signal ***", "Signal: %s (%d)", "Signal code: %s (%d)", "Failing at
  address: %p", the frames, "*** End of error message ***": the process crashed on that node;
- mpirun's help-orterun.txt [orterun:proc-aborted-strsignal] "%s noticed that process rank %lu with PID %lu on node %s
  exited on signal %d (%s).": its PID and node tie the report above to that rank;
- torch.multiprocessing's spawn (torch/multiprocessing/spawn.py, ProcessContext.join): the parent re-raises a child's
  error as ProcessRaisedException, "-- Process %d terminated with the following error:" and the child's traceback: the
  child's error (here gloo's unbound_buffer.cc "Timed out waiting %dms for send operation to complete") is the failure;
- NCCL's enqueue.cc getAlgoInfo: WARN("Error : no algorithm/protocol available") and ncclInternalError (NCCL_ALGO or
  NCCL_PROTO left no algorithm for the collective), on every rank alike;
- compute-sanitizer's (cuda-memcheck's) API error report "Program hit %s (error %d) due to \"%s\" on CUDA API call to
  %s.": a CUDA runtime call that failed;
- TensorFlow's collective_param_resolver_local.cc "Shape mismatch in the collective instance %d. Op at device %s expected
  shape %s but another member in the group expected shape %s.": a collective mismatch that names no culprit;
- PaddlePaddle's launcher (launch_utils.py watch_local_trainers): "ABORT!!! Out of all {} trainers, the trainer process
  with rank={} was aborted. Please check its log.", the list every trainer found exited non-zero in one poll.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def opal(node: str, pid: int, indent: str = "") -> str:
    tag = f"{indent}[{node}:{pid:05d}] "
    return (
        f"{tag}*** Process received signal ***\n{tag}Signal: Segmentation fault (11)\n"
        f"{tag}Signal code: Address not mapped (1)\n{tag}Failing at address: (nil)\n"
        f"{tag}[ 0] /lib/x86_64-linux-gnu/libpthread.so.0(+0x11390)[0x7f13ce25a390]\n"
        f"{tag}*** End of error message ***\n"
    )


def noticed(rank: int, pid: int, node: str) -> str:
    return (
        "-" * 74 + f"\nmpirun noticed that process rank {rank} with PID {pid} on node {node} exited on signal 11 "
        "(Segmentation fault).\n" + "-" * 74 + "\n"
    )


def test_mpiruns_pid_ties_open_mpis_signal_report_to_its_rank_and_node(tmp_path: Path) -> None:
    got = verdict(tmp_path, opal("gpu-node-3", 8812) + noticed(5, 8812, "gpu-node-3"))
    assert (got.klass, got.ranks, got.hosts) == ("child_failed_other", [5], ["gpu-node-3"])
    other = verdict(tmp_path, opal("gpu-node-3", 8812) + noticed(5, 9001, "gpu-node-4"))  # another process: no tie
    assert other.hosts != ["gpu-node-3"] or other.ranks != [5]


def test_open_mpis_signal_report_alone_names_the_node_it_ran_on(tmp_path: Path) -> None:
    got = verdict(tmp_path, opal("h06c0901", 7661, indent="    "))
    assert (got.klass, got.ranks, got.hosts) == ("child_failed_other", [], ["h06c0901"])
    both = verdict(tmp_path, opal("node-a", 2773) + opal("node-a", 2776))  # every crash on one node
    assert (both.ranks, both.hosts) == ([], ["node-a"])


def test_spawns_wrapper_is_not_the_failure_the_childs_error_below_it_is(tmp_path: Path) -> None:
    site = "/opt/conda/lib/python3.10/site-packages/torch"
    log = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 90, in <module>\n    mp.spawn(main, nprocs=2)\n'
        f'  File "{site}/multiprocessing/spawn.py", line 160, in join\n'
        "    raise ProcessRaisedException(msg, error_index, failed_process.pid)\n"
        "torch.multiprocessing.spawn.ProcessRaisedException:\n\n"
        "-- Process 1 terminated with the following error:\nTraceback (most recent call last):\n"
        f'  File "{site}/multiprocessing/spawn.py", line 69, in _wrap\n    fn(i, *args)\n'
        f'  File "{site}/distributed/distributed_c10d.py", line 2067, in all_gather\n    work.wait()\n'
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:136] Timed out waiting 1800000ms for "
        "send operation to complete\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks) == ("collective_timeout", [])  # "Process 1" is spawn's index, no rank


def test_no_algorithm_left_for_a_collective_is_ncclinternalerror_on_every_rank(tmp_path: Path) -> None:
    log = "".join(
        f"node{n}:{41367 + d}:{41367 + d} [{d}] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"
        for n in (1, 2)
        for d in (1, 2)
    )
    assert verdict(tmp_path, log)[:2] == ("nccl_system_error", [])


def test_compute_sanitizers_failed_runtime_call_is_a_cuda_error(tmp_path: Path) -> None:
    log = (
        '========= Program hit cudaErrorPeerAccessUnsupported (error 217) due to "peer access is not supported between '
        'these two devices" on CUDA API call to cudaIpcOpenMemHandle.\n'
    )
    assert verdict(tmp_path, log)[:2] == ("cuda_error", [])


def test_tensorflows_collective_shape_mismatch_names_no_member(tmp_path: Path) -> None:
    log = (
        "2022-07-25 11:57:07.265079: E tensorflow/core/common_runtime/ring_alg.cc:276] Aborting RingGather with Invalid "
        "argument: [_Derived_]Collective ops is aborted by: Shape mismatch in the collective instance 244. Op at device "
        "/job:worker/replica:0/task:1/device:CPU:0 expected shape [98] but another member in the group expected shape "
        "[102]. This is likely due to different input shapes at different members of the collective op.\n"
    )
    assert verdict(tmp_path, log)[:2] == ("collective_mismatch", [])


def test_paddles_launcher_names_a_trainer_only_when_it_is_alone_in_its_list(tmp_path: Path) -> None:
    def line(ranks: str) -> str:
        return (
            f"ERROR 2021-05-16 22:14:00,649 launch_utils.py:545] ABORT!!! Out of all 4 trainers, the trainer process "
            f"with rank={ranks} was aborted. Please check its log.\n"
        )

    assert verdict(tmp_path, line("[1, 2, 3]"))[:2] == ("child_failed_other", [])
    assert verdict(tmp_path, line("[2]"))[:2] == ("child_failed_other", [2])
