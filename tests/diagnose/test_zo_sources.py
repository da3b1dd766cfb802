"""What the blind set zo (tests/corpus/diagnose/heldout-zo.md) showed was not read, written from its sources' own format
strings, not from the set's cases (the logs below are built from them):

- PaddlePaddle's CUDA allocator (paddle/fluid/memory/allocation/cuda_allocator.cc): an operator's "raises an
  paddle::memory::allocation::BadAlloc exception", then "Out of memory error on GPU %d. Cannot allocate ...";
- MosaicML composer's launcher (composer/cli/launcher.py): "Rank {global_rank} crashed with exit code {code}." for the
  first process it finds dead, before it stops the others;
- gloo's tcp pair (transport/tcp/pair.cc): GLOO_ENFORCE_LE(op.preamble.length, op.nbytes), the two ends of one transfer
  disagreeing on its size;
- torch/csrc/cuda/nccl.cpp throw_nccl_error: "NCCL Error " << status << ": " << ncclGetErrorString(status).
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_paddles_bad_alloc_is_out_of_memory_whichever_line_says_it(tmp_path: Path) -> None:
    raised = "SystemError: (Fatal) Operator conv2d raises an paddle::memory::allocation::BadAlloc exception.\n"
    content = (
        "Out of memory error on GPU 2. Cannot allocate 413.281250MB memory on GPU 2, 23.532227GB memory has been "
        "allocated and available memory is only 123.312500MB.\n"
    )
    summary = (
        "ERROR 2022-01-20 12:39:07,498 launch_utils.py:636] ABORT!!! Out of all 4 trainers, the trainer process with "
        "rank=[0, 1, 2, 3] was aborted. Please check its log.\n"
    )
    for text in (raised + "The exception content is\n:ResourceExhaustedError:\n\n" + content + summary, content):
        got = verdict(tmp_path, text)
        assert (got.klass, got.ranks) == ("oom", []), text  # GPU 2 is the process's device, not a rank


def test_composers_launcher_names_the_rank_that_crashed_first(tmp_path: Path) -> None:
    text = (
        "2023-04-24 16:03:12,379: rank0[1003409][MainThread]: DEBUG: composer.utils.dist: Initializing torch.dist: "
        "global_rank=0, local_rank=0, world_size=8, local_world_size=8, node_rank=0\n"
        "ERROR:composer.cli.launcher:Rank 5 crashed with exit code 1.\n"
        "Waiting up to 30 seconds for all training processes to terminate. Press Ctrl-C to exit immediately.\n"
    )
    got = verdict(tmp_path, text)
    assert (got.klass, got.ranks, got.confidence) == ("child_failed_other", [5], "low")
    oom = "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert verdict(tmp_path, oom + text)[:2] == ("oom", [5])  # the rank's own error, where the log has it


def test_a_gloo_transfer_larger_than_its_posted_buffer_is_a_size_mismatch(tmp_path: Path) -> None:
    text = (
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n  what():  [enforce fail at "
        "../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 1046204 vs 1040256\n"
    )
    got = verdict(tmp_path, text)
    assert (got.klass, got.ranks, got.code) == ("collective_mismatch", [], "COL001")


def test_torch_cuda_nccls_error_is_the_result_it_names(tmp_path: Path) -> None:
    line = "terminate called after throwing an instance of 'std::runtime_error'\n  what():  NCCL Error {}\n"
    assert verdict(tmp_path, line.format("1: unhandled cuda error")).klass == "cuda_error"
    assert verdict(tmp_path, line.format("2: unhandled system error")).klass == "nccl_system_error"


def test_ncclgeterrorstrings_words_are_read_in_any_wrapper(tmp_path: Path) -> None:
    """ncclGetErrorString's texts for a system and a CUDA failure are NCCL's own, wherever a framework prints them:
    after ": ", a glog check's "(1 vs. 0) ", a runtime_error's "NCCL Error 1: ", a logger's "returned"."""
    for line, kind in (
        ("I0101 12:00:00.1 worker.cc:12] ncclAllReduce returned unhandled cuda error (1)", "cuda_error"),
        ("E0101 12:00:00.1 comm.cc:88] ncclCommInitRank returned unhandled system error", "nccl_system_error"),
        ("Check failed: r == ncclSuccess (1 vs. 0) unhandled cuda error", "cuda_error"),
    ):
        assert verdict(tmp_path, line + "\n").klass == kind, line
