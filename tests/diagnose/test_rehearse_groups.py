"""`validator rehearse` of a job with a parallel layout (issue 24 item 4): before the script, every
rank of a real torchrun (8 ranks on loopback, gloo) creates the layout's TP, PP and DP groups and runs
a collective in each (validator.preflight.groups, as `preflight --groups` does), on torchrun's agent
store. A rank held past its group's deadline is planted by the rehearsal's fault hook
(CV_FAULT_GROUPS, read only by validator/preflight/groups.py); the processes, torch, gloo and the
sockets are real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port
from validator.diagnose.rehearse import RunResult, groups_verdict
from validator.targets import expand_ranks

from .conftest import TORCHRUN, WORKER

ROOT = Path(__file__).resolve().parents[2]
MEGATRON = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]  # TP2 x PP2 x DP2 on 8


def rehearse(tmp_path: Path, *opts: str, script_args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed (scripts/setup.sh --full)")
    cmd = [sys.executable, "-m", "validator", "rehearse", "--max-seconds", "80", "--trace-dir", str(tmp_path / "tr"),
           *opts, "--", str(TORCHRUN), "--nproc-per-node=8", f"--master-port={free_port()}", "--max-restarts=0",
           str(WORKER), *script_args]  # fmt: skip
    run_env = dict(os.environ, SCENARIO="ok", OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.slow
def test_a_healthy_layout_rehearses_every_group_then_runs(tmp_path: Path) -> None:
    p = rehearse(tmp_path, "-q", script_args=MEGATRON)  # the layout from the job's own Megatron arguments
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "groups: 12 groups (dp x4, pp x4, tp x4) rehearsed on 8 ranks" in p.stderr, p.stderr[-2000:]
    traces = sorted((tmp_path / "tr").glob("trace_rank*.jsonl"))
    assert len(traces) == 8, "every rank ran the script after the rehearsal"
    calls = [json.loads(line) for line in traces[0].read_text().splitlines()]
    ops = [c["op"] for c in calls if c["kind"] == "call"]
    assert ops and "new_group" not in ops, "the script's calls alone are recorded, not the rehearsal's groups"


@pytest.mark.slow
def test_a_rank_held_past_its_pp_group_deadline_is_named_and_no_rank_runs_the_script(tmp_path: Path) -> None:
    p = rehearse(tmp_path, "-f", "json", "--layout", "tp=2,pp=2", script_args=[],
                 env={"CV_FAULT_GROUPS": "delay:pp:12@6"})  # fmt: skip
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    findings = json.loads(p.stdout)["findings"]
    assert [f["code"] for f in findings] == ["PRE011"], findings  # no diagnosis of the ranks' own exits
    assert findings[0]["message"].startswith("pp group [2,6]: "), findings[0]["message"][:300]
    assert "rank 6 (" in findings[0]["message"] and 6 in expand_ranks(findings[0]["ranks"])
    assert not list((tmp_path / "tr").glob("trace_rank*.jsonl")), "no rank ran the script"
    assert "Traceback" not in p.stderr


def test_a_layout_that_does_not_tile_the_world_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "validator", "rehearse", "--layout", "tp=3,pp=2", "--trace-dir",
           str(tmp_path / "tr"), "--", "torchrun", "--nproc-per-node=8", "train.py"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "validator: error: rehearse: the layout (--layout: tp=3 pp=2) does not tile the 8 ranks of this launch"
    ], p.stderr
    assert not (tmp_path / "tr").exists(), "nothing started"


def test_answers_are_read_as_hostile_and_silence_is_said(tmp_path: Path) -> None:
    done = RunResult(1, None, 1.0, str(tmp_path / "log"), str(tmp_path))
    found, lines = groups_verdict(str(tmp_path), done)  # the launcher failed, or the ranks died: the run's diagnosis
    assert (found, lines) == ([], ["groups: no rank answered the process group rehearsal (exit code 1)"])
    (tmp_path / ".groups-rank0.json").write_text("[" * 100_000)  # garbage from a rank: skipped, not a crash
    (tmp_path / ".groups-rank1.json").write_text('{"error": null, "lines": ["groups: 2 groups", "PRE012 slow: x"]}')
    found, lines = groups_verdict(str(tmp_path), done)
    assert [f.code for f in found] == ["PRE012"] and found[0].message == "slow: x" and lines == ["groups: 2 groups"]


@pytest.mark.slow
def test_a_rank_that_exits_in_its_pp_group_is_pre011_naming_the_group_and_rank(tmp_path: Path) -> None:
    """Rank 6 exits as it enters its PP group's collective: torchrun ends every other rank at once, so
    no rank answers; the rank torchrun saw fail first, and the group it was entering, are PRE011."""
    p = rehearse(tmp_path, "-f", "json", "--layout", "tp=2,pp=2", script_args=[],
                 env={"CV_FAULT_GROUPS": "exit:pp@6"})  # fmt: skip
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    findings = json.loads(p.stdout)["findings"]
    assert [f["code"] for f in findings] == ["PRE011"], findings  # not the run's diagnosis of the exits
    msg = findings[0]["message"]
    assert msg.startswith("pp group [2,6]: rank 6 (") and "exited (exit code 1) during its collective" in msg, msg
    assert expand_ranks(findings[0]["ranks"]) == [6]
    assert not list((tmp_path / "tr").glob("trace_rank*.jsonl")), "no rank ran the script"
    assert "Traceback" not in p.stderr


def test_a_killed_rank_is_named_from_torchruns_root_cause_read_as_hostile(tmp_path: Path) -> None:
    """The root cause of a rank killed by a signal, and where it was; garbage where it was is not a crash."""
    log = tmp_path / "rehearsal.log"
    log.write_text("x" * 200_000 + "\nRoot Cause (first observed failure):\n[0]:\n  time      : 2026-01-01_00:00:00\n"
                   "  host      : vm\n  rank      : 5 (local_rank: 5)\n  exitcode  : -9 (pid: 4242)\n"
                   "  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 4242\n")  # fmt: skip
    (tmp_path / ".groups-at-rank5.json").write_text('{"kind": "dp", "members": [1, 5], "host": "vm"}')
    done = RunResult(1, None, 1.0, str(log), str(tmp_path))
    found, lines = groups_verdict(str(tmp_path), done)
    assert [f.code for f in found] == ["PRE011"] and lines == []
    assert found[0].message.startswith("dp group [1,5]: rank 5 (vm) was killed (signal 9) during its collective")
    (tmp_path / ".groups-at-rank5.json").write_text('{"kind": "dp", "members": "[1, 5]"}')
    (found,), _ = groups_verdict(str(tmp_path), done)
    assert (
        found.message
        == "rank 5 was killed (signal 9) during the process group rehearsal, before its first group's collective"
    )
