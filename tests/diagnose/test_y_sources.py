"""What the blind set y (tests/corpus/diagnose/heldout-y.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- XLA's NCCL status check (xla/service/gpu/nccl_utils.cc): "%s:%d: NCCL operation %s failed: %s. Last NCCL
  warning(error) log entry (may be unrelated) '%s'." with ncclGetErrorString(s), as JAX and TensorFlow print it;
- torchrun's failure summary (torch/distributed/elastic/multiprocessing/errors/__init__.py, _format_failure:
  "[{idx}]:" then "time      : ...", "host      : ...", "rank      : {rank} (local_rank: {local_rank})", "exitcode  :
  {exitcode} (pid: {pid})", "error_file: ...", "traceback : ..."), an excerpt of it starting inside its list of other
  failures (no "Failures:" header above), or ending inside a rank line.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

XLA = (
    "{ts}: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2432] Execution of replica {r} failed: INTERNAL: "
    "Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' failed: "
    "external/xla/xla/service/gpu/nccl_utils.cc:275: NCCL operation {op} failed: {what}. Last NCCL warning(error) log "
    "entry (may be unrelated) ''.\n"
)


def test_xlas_nccl_operation_failures_carry_ncclgeterrorstring(tmp_path: Path) -> None:
    line = XLA.format(ts="2023-04-16 15:44:18.280050", r=1, op="ncclGroupEnd()", what="unhandled cuda error")
    assert verdict(tmp_path, line)[:2] == ("cuda_error", [])  # replica 1 is XLA's device index, not a rank
    internal = "internal error - please report this issue to the NCCL developers"
    line = XLA.format(
        ts="2023-04-16 15:44:18.280050", r=0, op="ncclCommInitRank(&comm, nranks, id, rank)", what=internal
    )
    assert verdict(tmp_path, line)[0] == "nccl_system_error"


def entry(idx: int, rank: int, time: str, exitcode: int = 1) -> str:
    return (
        f"[{idx}]:\n  time      : {time}\n  host      : server\n  rank      : {rank} (local_rank: {rank})\n"
        f"  exitcode  : {exitcode} (pid: {2680830 + rank})\n  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    )


def test_a_summary_cut_inside_its_list_still_shows_the_tie(tmp_path: Path) -> None:
    """The excerpt starts inside the other failures: their entries still count, so a Root Cause in the same second
    as them is a tie, not a first failure."""
    ts = "2024-08-17_13:24:04"
    others = "".join(entry(i, i, ts) for i in (4, 5, 6))
    root = "-" * 60 + "\nRoot Cause (first observed failure):\n" + entry(0, 0, ts) + "=" * 60 + "\n"
    assert verdict(tmp_path, others + root)[:2] == ("child_failed_other", [])
    later = "".join(entry(i, i, "2024-08-17_13:24:09") for i in (4, 5, 6))
    assert verdict(tmp_path, later + root)[:2] == ("child_failed_other", [0])  # the first by 5 s: rank 0


def test_a_root_cause_cut_inside_its_rank_line_still_names_the_rank(tmp_path: Path) -> None:
    text = (
        "Failures:\n  <NO_OTHER_FAILURES>\n" + "-" * 60 + "\nRoot Cause (first observed failure):\n[0]:\n"
        "  time      : 2023-06-04_02:11:04\n  host      : DESKTOP-1.lan\n  rank      : 2 (local_rank: 2"
    )
    assert verdict(tmp_path, text)[:2] == ("child_failed_other", [2])
