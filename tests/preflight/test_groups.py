"""`validator preflight --groups` (issue 24 item 4): after a pass, 8 real ranks (2 emulated nodes x 4,
told apart by SLURMD_NODENAME) create the layout's TP, PP and DP groups with gloo on loopback and
run collectives in each. A slow rank and a rank that never joins its PP group are planted by the
rehearsal's fault hook (CV_FAULT_GROUPS, read only by validator/preflight/groups.py); the processes,
torch, gloo and the sockets are real."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.preflight.conftest import preflight, ranks
from validator.preflight.groups import decide

pytestmark = pytest.mark.slow
LAYOUT = ("--groups", "--layout", "tp=2,pp=2", "--timeout", "60")


def eight(port: int) -> list[dict[str, str]]:
    envs = ranks(8, port, LOCAL_WORLD_SIZE="4")
    for r, e in enumerate(envs):
        e.update(LOCAL_RANK=str(r % 4), SLURMD_NODENAME=f"node{r // 4 + 1}")
    return envs


def test_healthy_layout_rehearses_every_group_and_runs(tmp_path: Path, port: int) -> None:
    marker = tmp_path / "ran"
    runs = preflight(tmp_path, eight(port), *LAYOUT, command=["sh", "-c", f"echo x >> {marker}"], limit=180)
    assert [r.rc for r in runs] == [0] * 8, [r.err[-800:] for r in runs if r.rc]
    assert "groups: 12 groups (dp x4, pp x4, tp x4) rehearsed on 8 ranks" in runs[0].err, runs[0].err[-800:]
    assert marker.read_text().count("x") == 8, "every rank execed the job after the rehearsal"


def test_a_slow_rank_is_named_with_its_group(tmp_path: Path, port: int) -> None:
    envs = eight(port)
    envs[5]["CV_FAULT_GROUPS"] = "delay:dp:2"
    runs = preflight(tmp_path, envs, *LAYOUT, limit=180)
    assert [r.rc for r in runs] == [0] * 8, "slow is a warning, not a block"
    lines = [line for line in runs[5].err.splitlines() if "PRE012" in line]
    assert lines and "rank 5 (node2) in dp group [" in lines[0], runs[5].err[-800:]


def test_a_rank_that_never_joins_its_pp_group_blocks_everyone(tmp_path: Path, port: int) -> None:
    marker = tmp_path / "ran"
    envs = eight(port)
    envs[6]["CV_FAULT_GROUPS"] = "exit:pp"
    runs = preflight(tmp_path, envs, *LAYOUT, command=["sh", "-c", f"echo x >> {marker}"], limit=180)
    assert all(r.rc != 0 for r in runs), [r.rc for r in runs]
    assert not marker.exists(), "nobody starts the job"
    assert "PRE011" in runs[0].err and "pp group [" in runs[0].err and "rank 6" in runs[0].err, runs[0].err[-800:]


def test_decide_names_a_silent_rank_and_a_failed_group() -> None:
    groups = {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]}
    ok = {"late": 0.001, "s": 0.002}
    reports = {0: {"host": "a", "groups": {"tp": ok, "dp": {"error": "Timeout"}}},
               1: {"host": "a", "groups": {"tp": ok, "dp": ok}},
               2: {"host": "b", "groups": {"tp": ok, "dp": {"error": "Timeout"}}}}  # fmt: skip
    got = decide(reports, groups, 4)
    assert got["error"] == "dp group [0,2]: rank 0 (a): Timeout; rank 2 (b): Timeout; dp group [1,3]: rank 3: " \
        "never reported; tp group [2-3]: rank 3: never reported"  # fmt: skip
    assert (got["ranks"], got["hosts"]) == ([0, 2, 3], ["a", "b"])  # failed or never reported (rank 3: no host known)
    healthy = {r: {"host": "h", "groups": {"tp": ok, "dp": ok}} for r in range(4)}
    assert decide(healthy, groups, 4) == {
        "error": None,
        "lines": ["groups: 4 groups (dp x2, tp x2) rehearsed on 4 ranks"],
        "ranks": [],
        "hosts": [],
    }
