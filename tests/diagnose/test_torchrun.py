"""Real torchrun runs (torch CPU, gloo) generated in the test: diagnose names the right rank
from their logs and Flight Recorder dumps; rehearse names the rank and the line."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validator.diagnose.run import diagnose_paths

from .conftest import TORCHRUN, WORKER, Scenario

pytestmark = pytest.mark.slow
SKIP_LINE = next(n for n, line in enumerate(WORKER.read_text().splitlines(), 1) if "dist.all_reduce(grads)" in line)
RAISE_LINE = next(n for n, line in enumerate(WORKER.read_text().splitlines(), 1) if "raise RuntimeError" in line)


def primary(paths: list[Path]) -> tuple[str, list[int], str, str]:
    _, d = diagnose_paths([str(p) for p in paths])
    assert d.primary is not None
    return d.primary.code, d.primary.culprits, d.primary.confidence, d.primary.summary


def test_mismatch_named_from_flight_recorder(torch_scenarios: dict[str, Scenario]) -> None:
    sc = torch_scenarios["mismatch"]
    assert sc.returncodes == [1]
    code, culprits, confidence, summary = primary([sc.dumps])
    assert (code, culprits, confidence) == ("COL001", [1], "high")
    assert "all_gather" in summary and "all_reduce" in summary
    # logs and dumps together: the dumps decide; logs alone show where each rank waited (the timeouts'
    # stacks: rank 1 in all_gather, ranks 0 and 2 in all_reduce), too few ranks for more than low confidence
    assert primary([*sc.logs, sc.dumps])[:2] == ("COL001", [1])
    assert primary(sc.logs)[:3] == ("COL001", [1], "low")


def test_skipped_all_reduce_from_dumps_and_tee_log(torch_scenarios: dict[str, Scenario]) -> None:
    sc = torch_scenarios["skip"]
    code, culprits, confidence, summary = primary([*sc.logs, sc.dumps])
    assert (code, culprits, confidence) == ("COL002", [1], "high")
    assert f"worker.py:{SKIP_LINE}" in summary and "skipped all_reduce" in summary
    # the --tee log carries [defaultN]:[rankN]: prefixes: every timeout is placed on its rank
    gz = sc.dir / "node0.log.gz"
    gz.write_bytes(gzip.compress(sc.logs[0].read_bytes()))
    _, d = diagnose_paths([str(gz)])
    assert set(d.collateral) | set(d.primary.culprits if d.primary else []) >= {0, 2}


def test_rank_that_raises_first(torch_scenarios: dict[str, Scenario]) -> None:
    sc = torch_scenarios["raise"]
    _, d = diagnose_paths([str(p) for p in sc.logs])
    assert d.primary is not None
    assert (d.primary.code, d.primary.culprits) == ("DGN010", [1])
    assert d.primary.confidence == "high"  # the exception and torchrun's Root Cause agree
    assert any(f"worker.py:{RAISE_LINE}" in s for s in d.primary.stack)


def test_missing_node(torch_scenarios: dict[str, Scenario]) -> None:
    sc = torch_scenarios["missing_node"]
    code, culprits, confidence, summary = primary(sc.logs)
    assert code == "DGN001" and "1/2 joined" in summary
    assert (culprits, confidence) == ([], "unknown")  # the store counts arrivals; it cannot name the absent node


def test_rehearse_names_rank_and_line(tmp_path: Path) -> None:
    env = dict(os.environ, SCENARIO="skip", OMP_NUM_THREADS="1", PG_TIMEOUT_S="20")
    cmd = [sys.executable, "-m", "validator", "rehearse", "--stall-seconds", "3", "--max-seconds", "60", "-q",
           "--trace-dir", str(tmp_path / "tr"), "-f", "json", "--",
           str(TORCHRUN), "--nproc-per-node=3", "--master-port=29621", str(WORKER)]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == 1, p.stderr.decode()[-2000:]
    import json

    diag = json.loads(p.stdout)["diagnosis"]
    assert diag["code"] == "COL002" and diag["initiating_ranks"] == [1] and diag["confidence"] == "high"
    assert f"worker.py:{SKIP_LINE}" in diag["summary"] and "skipped all_reduce" in diag["summary"]
    assert "if batch.numel() > 0" in diag["summary"]
    assert sorted(x.name for x in (tmp_path / "tr").glob("trace_rank*.jsonl")) == [
        f"trace_rank{r}.jsonl" for r in range(3)
    ]


def test_rehearse_names_a_skip_that_a_barrier_meets_not_its_own_stop(tmp_path: Path) -> None:
    """Red-teamed: where the skipping rank's next call is a barrier, the run hangs and rehearse stops it; the stop
    line in the output (its own SIGTERM) outranked the divergence the traces show ("no divergence seen")."""
    from tests.conftest import free_port

    script = Path(__file__).parent / "scripts" / "skip_then_barrier.py"
    cmd = [sys.executable, "-m", "validator", "rehearse", "--stall-seconds", "3", "--max-seconds", "60", "-q",
           "-f", "json", "--", str(TORCHRUN), "--nproc-per-node=2", f"--master-port={free_port()}", str(script)]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == 1, p.stderr.decode()[-2000:]
    import json

    diag = json.loads(p.stdout)["diagnosis"]
    # two ranks: no majority, so which one diverged is low confidence at best; that they diverged, and where, is told
    assert diag["code"] in ("COL001", "COL002"), diag
    assert "skip_then_barrier.py" in diag["summary"] and "barrier" in diag["summary"], diag


def test_rehearse_clean_run_passes(tmp_path: Path) -> None:
    env = dict(os.environ, SCENARIO="ok", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "validator", "rehearse", "--max-seconds", "60", "-q", "--",
           str(TORCHRUN), "--nproc-per-node=2", "--master-port=29623", str(WORKER)]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == 0, p.stdout.decode()[-2000:] + p.stderr.decode()[-2000:]
    assert b"no failure found" in p.stdout
