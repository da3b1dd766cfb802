"""Node-local aggregation in per-rank mode (issue 14 item 1): 2 nodes x 8 ranks of real
`validator preflight` processes on loopback. The two nodes are emulated by SLURMD_NODENAME, which
the facts take as the node's name (facts["host"]) and which names the node's local socket."""

from __future__ import annotations

from pathlib import Path

from tests.preflight.conftest import Run, preflight

NODES = ("nodea", "nodeb")
PER_NODE = 8


def two_nodes(port: int, **common: str) -> list[dict[str, str]]:
    return [
        {"RANK": str(n * PER_NODE + i), "LOCAL_RANK": str(i), "WORLD_SIZE": str(len(NODES) * PER_NODE),
         "LOCAL_WORLD_SIZE": str(PER_NODE), "GROUP_RANK": str(n), "SLURMD_NODENAME": node,
         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": "agg", **common}
        for n, node in enumerate(NODES)
        for i in range(PER_NODE)
    ]  # fmt: skip


def verdict_line(run: Run) -> str:
    lines = [line for line in run.err.splitlines() if line.startswith("preflight ")]
    assert lines, run.err
    return lines[-1]


def outcomes(run: Run) -> list[tuple[str, str]]:
    assert run.report is not None, run.err
    return [(o["target"], o["detail"]) for o in run.report["outcomes"]]


def test_two_nodes_of_eight_ranks_pass_over_one_connection_per_other_node(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, two_nodes(port), "--timeout", "60", "--hosts", "nodea,nodeb")
    assert [r.rc for r in runs] == [0] * 16, [r.err for r in runs if r.rc]
    line = verdict_line(runs[0])
    assert "PASSED: 16/16 ranks" in line
    # node b's leader carried its 8 ranks in one TCP connection; node a's 7 other ranks met the
    # coordinator on its node-local socket: 1 TCP connection, not 15
    assert "over 1 TCP connection(s) and 7 node-local" in line, line
    reports = [r.report for r in runs]
    assert all(rep == reports[0] for rep in reports), "every rank gets the same report"
    assert reports[0] is not None and reports[0]["participants"] == 16


def test_missing_local_rank_is_named_by_rank_and_host(tmp_path: Path, port: int) -> None:
    envs = two_nodes(port)
    del envs[11]  # rank 11: local rank 3 of nodeb
    runs = preflight(tmp_path, envs, "--timeout", "12", "--hosts", "nodea,nodeb")
    assert {r.rc for r in runs} == {3}, [r.err for r in runs]
    got = outcomes(runs[0])
    assert [t for t, _ in got] == ["rank 11"], got
    assert "expected on nodeb" in got[0][1]
    assert "over 1 TCP connection(s) and 7 node-local" in verdict_line(runs[0])
    assert all(r.report == runs[0].report for r in runs), "the leader fanned the verdict out to its ranks"


def test_missing_node_leader_its_ranks_fall_back_to_the_coordinator(tmp_path: Path, port: int) -> None:
    envs = two_nodes(port)
    del envs[8]  # rank 8: local rank 0 of nodeb, its leader
    runs = preflight(tmp_path, envs, "--timeout", "12", "--hosts", "nodea,nodeb")
    assert {r.rc for r in runs} == {3}, [r.err for r in runs]
    got = outcomes(runs[0])
    assert [t for t, _ in got] == ["rank 8"], got
    assert "expected on nodeb" in got[0][1]
    # nodeb's 7 ranks found no leader and connected directly, each over TCP
    assert "over 7 TCP connection(s) and 7 node-local" in verdict_line(runs[0])
    assert all(r.report == runs[0].report for r in runs)
