"""What the blind set ze (tests/corpus/diagnose/heldout-ze.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- torchrun's failure summary (torch/distributed/elastic/multiprocessing/errors/__init__.py, ChildFailedError.format_msg:
  the first failure under "Root Cause (first observed failure):", every other one under "Failures:"), an excerpt cut
  before its Root Cause: a failure listed under "Failures:" is never the first;
- WorkNCCL's repr in the watchdog's line ("WorkNCCL(SeqNum=%d, OpType=%s, ...") with its OpType cut short by a
  terminal's overlay ("_ALLGATHER_BA[451/1919]");
- torchrun's agent line "failed (exitcode: %d) local_rank: %d (pid: %d) of binary: %s" as rich's log handler wraps it.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def entry(idx: int, rank: int, time: str, exitcode: int = 1) -> str:
    return (
        f"[{idx}]:\n  time      : {time}\n  host      : node-a\n  rank      : {rank} (local_rank: {rank})\n"
        f"  exitcode  : {exitcode} (pid: {5913 + rank})\n  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    )


HEAD = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + "=" * 60 + "\ntrain.py FAILED\n" + "-" * 60
)


def test_a_summary_cut_before_its_root_cause_names_none_of_its_other_failures(tmp_path: Path) -> None:
    others = HEAD + "\nFailures:\n" + entry(1, 3, "2024-04-27_17:51:07")
    got = verdict(tmp_path, others)
    assert (got.klass, got.ranks) == ("child_failed_other", [])
    root = others + "-" * 60 + "\nRoot Cause (first observed failure):\n" + entry(0, 0, "2024-04-27_17:51:02")
    assert verdict(tmp_path, root + "=" * 60 + "\n")[:2] == ("child_failed_other", [0])
    alone = HEAD + "\nFailures:\n  <NO_OTHER_FAILURES>\n" + "-" * 60 + "\nRoot Cause (first observed failure):\n"
    assert verdict(tmp_path, alone + entry(0, 2, "2024-04-27_17:51:07") + "=" * 60 + "\n")[:2] == (
        "child_failed_other",
        [2],
    )


def test_tied_failures_on_one_host_name_that_host(tmp_path: Path) -> None:
    ts = "2024-05-29_07:54:06"
    got = verdict(tmp_path, HEAD + "\nFailures:\n" + "".join(entry(i, i, ts) for i in (1, 2, 3)))
    assert (got.klass, got.ranks, got.hosts) == ("child_failed_other", [], ["node-a"])


def test_an_optype_cut_short_on_its_line_is_the_same_op(tmp_path: Path) -> None:
    def line(rank: int, op: str) -> str:
        return (
            f"[rank{rank}]:[E816 00:34:01.133910474 ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=137429, OpType={op}, NumelIn=71552, NumelOut=572416, "
            "Timeout(ms)=600000) ran for 600004 milliseconds before timing out.\n"
        )

    cut = line(2, "_ALLGATHER_BA[451/1919]") + line(0, "_ALLGATHER_BASE")
    assert verdict(tmp_path, cut)[:2] == ("collective_timeout", [])
    assert verdict(tmp_path, line(2, "ALLREDUCE") + line(0, "_ALLGATHER_BASE"))[0] == "collective_mismatch"


def test_the_agents_failure_line_as_rich_wraps_it(tmp_path: Path) -> None:
    rich = (
        "[01:21:55] ERROR    failed (exitcode: -7) local_rank: 0 (pid:      api.py:672\n"
        "                    2255697) of binary:\n"
        "                    /root/miniconda3/envs/sd/bin/python\n"
    )
    assert verdict(tmp_path, rich)[:2] == ("child_failed_other", [])
