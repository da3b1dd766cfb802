"""Verdicts on real logs: torch 2.13 gloo runs (harness) and public NCCL excerpts (GPU classes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.run import diagnose_paths

FIX = Path(__file__).parent.parent / "fixtures"
LOGS = FIX / "logs"
PUBLIC = FIX / "diagnose" / "public"


def verdict(*paths: Path) -> tuple[str | None, list[int], str]:
    _, d = diagnose_paths([str(p) for p in paths])
    p = d.primary
    return (p.code, p.culprits, p.confidence) if p else (None, [], "unknown")


@pytest.mark.parametrize(
    ("name", "code", "culprits", "confidence"),
    [
        ("torch-collective_mismatch_detail.log", "COL001", [1], "high"),
        # gloo timeouts on every rank and nothing else: the honest answer is "unknown"
        ("torch-collective_mismatch.log", "COL003", [], "unknown"),
        ("torch-missing_node.log", "DGN001", [], "unknown"),
        ("torch-missing_node_c10d.log", "DGN001", [], "unknown"),
        ("torch-master_port_node.log", "DGN002", [], "low"),
        ("torch-collective_mismatch_default_timeouts.log", "DGN014", [], "medium"),
        ("torch-ok.log", None, [], "unknown"),
        ("torch-ok_c10d.log", None, [], "unknown"),
        ("slurm-torchrun-2nodes.log", None, [], "unknown"),
    ],
)
def test_harness_logs(name: str, code: str | None, culprits: list[int], confidence: str) -> None:
    assert verdict(LOGS / name) == (code, culprits, confidence)


def test_master_port_rank_names_the_odd_port() -> None:
    _report, d = diagnose_paths([str(LOGS / "torch-master_port_rank.log")])
    assert d.primary is not None and d.primary.code == "DGN002"
    assert d.primary.expected == "port 29540" and d.primary.actual == "port 29541"


def test_flight_recorder_gloo_dumps_name_rank_1() -> None:
    assert verdict(FIX / "diagnose" / "fr-gloo") == ("COL001", [1], "high")
    # the logs alone cannot tell; with the dumps the dumps decide
    assert verdict(LOGS / "torch-fr_mismatch.log", FIX / "diagnose" / "fr-gloo")[:2] == ("COL001", [1])


@pytest.mark.parametrize(
    ("name", "code", "culprits", "confidence"),
    [
        ("nccl-duplicate-gpu-mpirun.log", "DGN004", [0, 1, 2, 4, 5], "high"),
        ("nccl-duplicate-gpu-exception.log", "DGN004", [0, 3, 7], "high"),
        ("nccl-desync-report.log", "COL002", [7], "high"),
        # alone in an excerpt, a rank's own error is only the first visible one: named, low confidence
        ("cuda-illegal-address-watchdog.log", "DGN008", [0], "low"),
        # a host-level setting points at the host, not at the rank that printed it
        ("nccl-no-socket-interface.log", "DGN005", [], "unknown"),
        ("cuda-oom-rank3.log", "DGN009", [3], "low"),
        ("nccl-watchdog-timeout.log", "COL003", [], "unknown"),
        ("nccl-watchdog-old-format.log", "COL003", [], "unknown"),
        ("elastic-sigkill-old-format.log", "DGN011", [], "medium"),
    ],
)
def test_public_nccl_excerpts(name: str, code: str, culprits: list[int], confidence: str) -> None:
    assert verdict(PUBLIC / name) == (code, culprits, confidence)


def test_watchdog_silent_rank_is_the_suspect(tmp_path: Path) -> None:
    """Per-rank logs where ranks 0-2 time out in #808 and rank 3 says nothing about it."""
    src = (PUBLIC / "nccl-watchdog-timeout.log").read_text().splitlines()[1:]
    for r in range(3):
        (tmp_path / f"rank{r}.log").write_text("\n".join(x for x in src if x.startswith(f"[rank{r}]")) + "\n")
    (tmp_path / "rank3.log").write_text("[rank3]: step 1 loss 2.0\n")
    code, culprits, confidence = verdict(tmp_path)
    assert (code, culprits, confidence) == ("COL002", [3], "medium")


def test_earliest_origin_wins_by_timestamp(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_text(
        "[rank0]:[E1130 10:00:05.000000000 x.cpp:1] CUDA error: an illegal memory access was encountered\n"
    )
    (tmp_path / "rank5.log").write_text(
        "[rank5]:[E1130 10:00:01.000000000 x.cpp:1] CUDA error: an illegal memory access was encountered at 5\n"
    )
    (tmp_path / "rank2.log").write_text(
        "[rank2]:[E1130 10:09:00.000000000 y.cpp:1] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 2 milliseconds before timing out.\n"
    )
    _report, d = diagnose_paths([str(tmp_path)])
    assert d.primary is not None and (d.primary.code, d.primary.culprits, d.primary.confidence) == (
        "DGN008",
        [5],
        "medium",
    )
    assert 2 in d.collateral and 0 in d.collateral


GPU = FIX / "diagnose" / "nccl-gpu"  # real NCCL 2.28.9 captures on an H200 (see its README)


def test_real_nccl_duplicate_gpu() -> None:
    assert verdict(GPU / "nccl-duplicate-gpu.log") == ("DGN004", [0, 1], "high")


def test_real_nccl_skipped_all_reduce() -> None:
    """Rank 0's desync report names rank 1; rank 1's later report ("[0, 1] joined but didn't
    finish") must not dilute it. The dumps alone have no majority with two ranks: the rank
    without the call is named (medium); with the log both agree (high)."""
    _, d = diagnose_paths([str(GPU / "nccl-skipped-allreduce.log")])
    assert d.primary is not None and (d.primary.code, d.primary.culprits, d.primary.confidence) == (
        "COL002",
        [1],
        "high",
    )
    assert "collective #2" in d.primary.summary
    assert verdict(GPU / "fr-skip") == ("COL002", [1], "medium")
    _, d = diagnose_paths([str(GPU / "fr-skip"), str(GPU / "nccl-skipped-allreduce.log")])
    assert d.primary is not None and (d.primary.culprits, d.primary.confidence) == ([1], "high")
    assert "nccl_scenarios.py:41" in d.primary.summary


def test_real_nccl_mismatch_two_ranks_names_nobody() -> None:
    """all_reduce on rank 0, all_gather on rank 1, both inside branches: no majority, no guess."""
    assert verdict(GPU / "nccl-mismatched-collective.log") == ("COL001", [], "unknown")
    _, d = diagnose_paths([str(GPU / "fr-mismatch")])
    assert d.primary is not None and (d.primary.code, d.primary.culprits, d.primary.confidence) == (
        "COL001",
        [],
        "unknown",
    )
    assert "nccl_scenarios.py:34" in d.primary.summary and "nccl_scenarios.py:36" in d.primary.summary
