"""NCCL_DEBUG_SUBSYS=COLL sequences: the first opCount where the ranks of a communicator part.

The lines keep NCCL's own format (src/enqueue.cc, src/init.cc; as posted in public logs, e.g.
``tpgds-aihub0007:177794:177794 [7] NCCL INFO AllReduce: opCount 0 sendbuff 0x7fb201e00400 ...``);
the job is a 4-rank run where one rank diverges."""

from __future__ import annotations

from pathlib import Path

from validator.diagnose.run import diagnose_paths

INIT = "{h}:{p}:{p} [{r}] NCCL INFO ncclCommInitRank comm 0x55{r}f79e65f00 rank {r} nranks 4 cudaDev {r} nvmlDev {r} busId {r}1000 commId 0x3f2a9c1d5e7b4410 - Init COMPLETE"
COLL = ("{h}:{p}:{p} [{r}] NCCL INFO {op}: opCount {n:x} sendbuff 0x7fb201e00400 recvbuff 0x7fb201e00400 count {c} "
        "datatype 7 op 0 root 0 comm 0x55{r}f79e65f00 [nranks=4] stream 0x558f83fe3ca0")  # fmt: skip


def job(tmp_path: Path, calls: dict[int, list[tuple[str, int]]]) -> Path:
    lines = [INIT.format(h="node7", p=17790 + r, r=r) for r in calls]
    for n in range(max(len(c) for c in calls.values())):
        for r, c in calls.items():
            if n < len(c):
                lines.append(COLL.format(h="node7", p=17790 + r, r=r, op=c[n][0], n=n, c=c[n][1]))
    path = tmp_path / "nccl.log"
    path.write_text("\n".join(lines) + "\n")
    return path


STEP = [("AllReduce", 18816), ("AllReduce", 1), ("Broadcast", 513)] * 6


def test_different_collective_at_one_opcount(tmp_path: Path) -> None:
    bad = [*STEP[:10], ("AllGather", 2052), *STEP[11:]]
    _, d = diagnose_paths([str(job(tmp_path, {0: STEP, 1: STEP, 2: bad, 3: STEP}))])
    p = d.primary
    assert p is not None and (p.code, p.culprits, p.confidence) == ("COL001", [2], "high")
    assert "opCount 0xa" in p.summary and "AllGather count 2052 float32" in p.summary
    assert p.expected == "AllReduce count 1 float32" and p.actual != p.expected


def test_rank_that_stopped_logging(tmp_path: Path) -> None:
    _, d = diagnose_paths([str(job(tmp_path, {0: STEP, 1: STEP, 2: STEP, 3: STEP[:7]}))])
    p = d.primary
    assert p is not None and (p.code, p.culprits) == ("COL002", [3]) and "opCount 0x7" in p.summary


def test_identical_sequences_are_no_failure(tmp_path: Path) -> None:
    _, d = diagnose_paths([str(job(tmp_path, {0: STEP, 1: STEP, 2: STEP, 3: STEP}))])
    assert d.primary is None
