"""Lines of another process between a block's lines (several processes writing to one terminal or file): a block
reader skips them where the block's own format says they cannot be its own, so the attribution does not change. Found by
inserting noise lines into the corpus's labelled cases: each of these shapes named a wrong rank, medium or high.

- Python's traceback: no frame follows its exception line, and a source line follows only its frame;
- torchrun's summary (elastic/multiprocessing/errors _format_failure): an entry's fields under its "[N]:" opener;
- Horovod's stall report (stall_inspector.cc): "Missing ranks:" and its "R: [tensors]" lines carry one prefix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict

NOISE = "step 12 loss 0.5 | lr 3.0e-04"

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/grpo.py", line 604, in <module>',
    "    trainer = GRPOTrainer(",
    '  File "/site-packages/vllm/distributed/utils.py", line 410, in create',
    "    store = TCPStore(",
    "torch.distributed.DistNetworkError: The client socket has timed out after 300000ms while trying to connect to "
    "(127.0.0.1, 51216).",
]


@pytest.mark.parametrize("at", range(1, 5))
def test_a_line_between_a_tracebacks_frames_is_not_its_exception(tmp_path: Path, at: int) -> None:
    """vLLM's own TCPStore (no torch.distributed frame): its host is the group's creator, never rank 0 of a world."""
    assert verdict(tmp_path, "\n".join(TRACEBACK) + "\n")[:2] == ("rendezvous_timeout", [])
    mixed = [*TRACEBACK[:at], NOISE, *TRACEBACK[at:]]
    assert verdict(tmp_path, "\n".join(mixed) + "\n")[:2] == ("rendezvous_timeout", [])


def entry(rank: int, root: bool = False) -> list[str]:
    return [f"[{rank}]:", "  time      : 2024-03-05_07:01:51", "  host      : node1", f"  rank      : {rank} (local_rank: "
            f"{rank})", f"  exitcode  : 1 (pid: {6981 + rank})", "  error_file: <N/A>",
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]  # fmt: skip


@pytest.mark.parametrize("at", range(1, 6))
def test_a_line_inside_a_summary_entry_keeps_the_tie(tmp_path: Path, at: int) -> None:
    """Four failures in one second, torchrun's Root Cause the first of them in its own order: a tie names nobody."""
    others = entry(2)
    summary = [*entry(1)[1:], *others[:at], NOISE, *others[at:], *entry(3), "-" * 60,
               "Root Cause (first observed failure):", *entry(0), "=" * 60]  # fmt: skip
    got = verdict(tmp_path, "\n".join(summary) + "\n")
    assert got[1] == [], got


def test_a_line_inside_horovods_missing_ranks_block_keeps_the_split(tmp_path: Path) -> None:
    tag = "Fri Sep 18 03:11:09 2020[0]<stderr>:"
    head = (
        "[2020-09-18 03:11:09.347196: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be "
        "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 "
        "seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of "
        "ranks is submitting tensors, which will cause deadlock."
    )
    block = [tag + head, tag + "Missing ranks:", *(f"{tag}{r}: [broadcast_object_fn.sz]" for r in range(6)), NOISE,
             *(f"{tag}{r}: [broadcast_object_fn.sz]" for r in (6, 7)), f"{tag}8: [allreduce.grad_conv1]"]  # fmt: skip
    assert verdict(tmp_path, "\n".join(block) + "\n")[:2] == ("missing_rank", [])
