"""What the blind set u (tests/corpus/diagnose/heldout-u.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- JAX's coordination service (openxla/xla xla/tsl/distributed_runtime/coordination/coordination_service.cc): an expired
  barrier, "Barrier timed out. Id: %s. ...\\n# of tasks that reached the barrier: %d/%d.\\nThe first task at the
  barrier: %s. Some timed out task names:\\n%s" (one "/job:NAME/replica:R/task:N" line per pending task, up to a log
  limit; older releases "Barrier timed out. Barrier_id: %s. Timed out task names:"), and "Stopping coordination service
  as cluster registration failed";
- horovodrun's gloo launcher (horovod/runner/gloo_run.py): "The first process to do so was:\\nProcess name:
  {name}\\nExit code: {code}", name the slot's rank (launch_gloo) or "{host}[{local_rank}]" (the elastic driver);
- Lightning (lightning_fabric/strategies/launchers/subprocess_script.py _ChildProcessObserver): "[rank: N] Child process
  with PID %d terminated with code %d. ...";
- accelerate (src/accelerate/state.py PartialState.__repr__): "Num processes: %d\\nProcess index: %d\\nLocal process
  index: %d\\nDevice: %s", and its test runner's "stderr: " label (test_utils/testing.py);
- Determined (harness/determined/launch/wrap_rank.py): "[rank={rank}] {line}";
- ProcessGroupNCCL's heartbeat monitor: "ProcessGroupNCCL's watchdog got stuck for %d seconds ...".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.logs import parse_line

from .corpus import verdict


def _jax(barrier: str, reached: int, total: int, pending: list[int]) -> str:
    names = "".join(f"/job:jax_worker/replica:0/task:{t}\n" for t in pending)
    return (
        f"jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: {barrier}. This usually "
        "happens because a task triggered the barrier too early or too slowly. Please look at the task logs (both "
        f"timed out and first task) to debug further.\n# of tasks that reached the barrier: {reached}/{total}.\n"
        f"The first task at the barrier: /job:jax_worker/replica:0/task:0. Some timed out task names:\n{names}\n"
    )


def test_a_jax_barrier_names_the_one_task_that_never_came(tmp_path: Path) -> None:
    assert verdict(tmp_path, _jax("sync_step.0", 3, 4, [2]))[:2] == ("missing_rank", [2])


def test_a_jax_barrier_with_several_missing_tasks_or_a_cut_list_names_none(tmp_path: Path) -> None:
    assert verdict(tmp_path, _jax("sync_step.0", 2, 4, [1, 3]))[:2] == ("missing_rank", [])
    # 13 of 16 pending, one listed: the log limit cut the list, so the one listed is not the only one
    assert verdict(tmp_path, _jax("sync_step.0", 3, 16, [5]))[:2] == ("missing_rank", [])


def test_jax_cluster_registration_that_names_no_task_is_a_rendezvous_timeout(tmp_path: Path) -> None:
    text = (
        "Stopping coordination service as cluster registration failed. This may be due to 1) some tasks crashed "
        "earlier before connecting, 2) some tasks were never scheduled, or 3) scheduling delays.\n"
    )
    assert verdict(tmp_path, text)[:2] == ("rendezvous_timeout", [])


HVD = (
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to "
    "be terminated. The first process to do so was:\nProcess name: {name}\nExit code: {code}\n"
)


def test_horovods_gloo_launcher_names_the_first_rank_to_exit(tmp_path: Path) -> None:
    assert verdict(tmp_path, HVD.format(name="3", code=1))[:3] == ("child_failed_other", [3], "low")


def test_horovods_elastic_driver_names_a_host_and_a_local_slot_not_a_rank(tmp_path: Path) -> None:
    klass, ranks, _conf, hosts, _ = verdict(tmp_path, HVD.format(name="trainer-2[1]", code=1))
    assert (klass, ranks, hosts) == ("child_failed_other", [], ["trainer-2"])


def test_lightnings_child_observer_names_the_child_by_its_prefix(tmp_path: Path) -> None:
    text = (
        "[rank: 2] Child process with PID 4411 terminated with code 1. Forcefully terminating all other processes to "
        "avoid zombies\n"
    )
    assert verdict(tmp_path, text)[:2] == ("child_failed_other", [2])


def _state(index: int, local: int, device: str) -> str:
    return (
        "Distributed environment: MULTI_GPU  Backend: nccl\nNum processes: 3\n"
        f"Process index: {index}\nLocal process index: {local}\nDevice: {device}\n\n"
    )


DUP = "Last error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 3b000\n"


def test_accelerates_state_widens_a_duplicate_gpu_pair_to_every_process_on_the_device(tmp_path: Path) -> None:
    same = _state(0, 0, "cuda:0") + _state(1, 1, "cuda:0") + _state(2, 2, "cuda:0")
    assert verdict(tmp_path, same + DUP)[:2] == ("nccl_init_duplicate_gpu", [0, 1, 2])
    # a third process on its own GPU is not one of them; two nodes' cuda:0 are two devices
    apart = _state(0, 0, "cuda:0") + _state(1, 1, "cuda:0") + _state(2, 2, "cuda:1")
    assert verdict(tmp_path, apart + DUP)[:2] == ("nccl_init_duplicate_gpu", [0, 1])
    nodes = _state(0, 0, "cuda:0") + _state(1, 1, "cuda:0") + _state(2, 0, "cuda:0")
    assert verdict(tmp_path, nodes + DUP)[:2] == ("nccl_init_duplicate_gpu", [0, 1])


def test_a_double_spaced_last_error_is_read_and_an_empty_one_is_not_filled(tmp_path: Path) -> None:
    head = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1, invalid usage, NCCL version 2.27.3\n\n"
    spaced = head + "Last error:\n\nBootstrap : no socket interface found\n"
    assert verdict(tmp_path, spaced)[0] == "nccl_init_no_interface"
    empty = (
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        "Last error:\n\nhost-1:12:12 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 busId 7000 - Abort COMPLETE\n"
    )
    assert verdict(tmp_path, empty)[0] == "nccl_system_error"


def test_the_heartbeat_monitors_stuck_watchdog_is_read_without_other_failure_words(tmp_path: Path) -> None:
    text = (
        "[rank4]:[E1224 16:22:36.695363169 ProcessGroupNCCL.cpp:1484] [PG ID 0 PG GUID 0(default_pg) Rank 4] "
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
        "collectives.\n"
    )
    assert verdict(tmp_path, text)[0] == "collective_timeout"


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("[rank=3] RuntimeError: CUDA out of memory.", 3),  # Determined's wrap_rank.py
        ("[5c902731] [rank=1] RuntimeError: x", 1),  # behind the container id, as its web UI copies it
        ("> [] [rank=0] RuntimeError: x", 0),  # quoted in Markdown
        ("<info>    [2021-12-07 10:43:01] 087c0ee7 [rank=2] || RuntimeError: x", 2),  # det's CLI
        ("stderr: [rank1]: RuntimeError: x", 1),  # accelerate's test runner
    ],
)
def test_determined_and_accelerate_prefixes(line: str, rank: int) -> None:
    got = parse_line(line, 2025)
    assert got.ident.rank == rank and got.text.startswith("RuntimeError")


def test_an_exit_code_of_128_plus_a_signal_is_that_signal(tmp_path: Path) -> None:
    """A shell (or ssh, or a wrapper script) reports a child killed by signal N as 128 + N: 137 is SIGKILL, as
    torchrun reports it (-9), with the OOM killer's hint."""
    got = verdict(tmp_path, HVD.format(name="3", code=137))
    assert got.klass == "child_failed_other" and got.ranks == [3] and got.code == "DGN011"
    assert verdict(tmp_path, HVD.format(name="3", code=1)).code == "DGN010"
