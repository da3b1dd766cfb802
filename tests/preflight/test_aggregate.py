"""Node-local aggregation in per-rank mode (issue 14 item 1): 2 nodes x 8 ranks of real
`validator preflight` processes on loopback, the two nodes emulated by SLURMD_NODENAME (which the
facts take as the node's name, facts["host"], and which names the node's local socket); and the
same job on two network namespace hosts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NetnsHosts
from tests.harness import hostile
from tests.preflight.conftest import Run, base_env, collect, preflight, start, tails
from validator import pipeline
from validator.preflight import protocol as wire
from validator.preflight import refusals, sections

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


@pytest.mark.parametrize("secret", ["", "s3cret"])
def test_two_nodes_of_eight_ranks_pass_over_one_connection_per_other_node(
    tmp_path: Path, port: int, secret: str
) -> None:
    """With a secret, each rank signs its own facts under the nonce its leader forwards."""
    envs = two_nodes(port, **({"VALIDATOR_SECRET": secret} if secret else {}))
    runs = preflight(tmp_path, envs, "--timeout", "60", "--hosts", "nodea,nodeb")
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
    assert {r.rc for r in runs} == {3}, tails(runs)
    got = outcomes(runs[0])
    assert [t for t, _ in got] == ["rank 11"], got
    assert "expected on nodeb" in got[0][1]
    assert "over 1 TCP connection(s) and 7 node-local" in verdict_line(runs[0])
    assert all(r.report == runs[0].report for r in runs), "the leader fanned the verdict out to its ranks"


def test_missing_node_leader_its_ranks_fall_back_to_the_coordinator(tmp_path: Path, port: int) -> None:
    envs = two_nodes(port)
    del envs[8]  # rank 8: local rank 0 of nodeb, its leader
    runs = preflight(tmp_path, envs, "--timeout", "12", "--hosts", "nodea,nodeb")
    assert {r.rc for r in runs} == {3}, tails(runs)
    got = outcomes(runs[0])
    assert [t for t, _ in got] == ["rank 8"], got
    assert "expected on nodeb" in got[0][1]
    # nodeb's 7 ranks found no leader and connected directly, each over TCP
    assert "over 7 TCP connection(s) and 7 node-local" in verdict_line(runs[0])
    assert all(r.report == runs[0].report for r in runs)


def lead(port: int, docs: list[dict[str, Any]], secrets: list[bytes | None], **extra: Any) -> dict[str, Any]:
    """Act as a node leader: one frame carrying ``docs``, each signed with its own entry of
    ``secrets`` under the coordinator's nonce; the coordinator's reply."""
    s = hostile.connect(port)
    with s:
        nonce = str(hostile.reply(s).get("nonce", ""))
        bodies = [json.dumps(d, separators=(",", ":")).encode() for d in docs]
        ranks = [{"size": len(b), "token": f"tok{i}", "mac": wire.mac(k, nonce, "", b, f"tok{i}")}
                 for i, (b, k) in enumerate(zip(bodies, secrets, strict=True))]  # fmt: skip
        body = b"".join(bodies)
        head = {"type": "facts", "proto": wire.PROTO, "job_id": "", "size": len(body), "mac": ranks[0]["mac"],
                "token": "tok0", "listen": None, "ranks": ranks, **extra}  # fmt: skip
        s.sendall(wire.encode(head) + wire.frame(body))
        return hostile.reply(s)


def test_a_leader_cannot_speak_for_another_node_or_sign_for_its_ranks(port: int) -> None:
    """A real Coordinator (in this process, hostile.Live) and hand-made leader frames: a leader's
    ranks are registered only when every one is signed by its own rank (the secret), on the
    leader's host, and no more than its local world size."""
    env = two_nodes(port)
    own = pipeline.probe_local(environ=base_env(**env[0]), port_check=False)
    secret = b"s3cret"
    live = hostile.Live(own, set(range(16)), secret)

    def rank(r: int, host: str = "nodeb", lws: int = PER_NODE) -> dict[str, Any]:
        doc = json.loads(json.dumps(own))
        doc["host"], doc["pid"] = host, 100_000 + r
        doc["launch"].update(rank=r, local_rank=r % PER_NODE, local_world_size=lws)
        return doc

    try:
        other_node = lead(live.port, [rank(8), rank(9), rank(3, host="nodea")], [secret] * 3)
        unsigned = lead(live.port, [rank(8), rank(9)], [secret, b"the leader's guess"])
        too_many = lead(live.port, [rank(8, lws=2), rank(9), rank(10)], [secret] * 3)
        over_limit = lead(live.port, [rank(8)] * 65, [secret] * 65)
        twice = lead(live.port, [rank(8), rank(9), rank(9)], [secret] * 3)
        assert live.c is not None and len(live.c.arrivals) == 1, "nothing registered from a refused leader"
        honest = lead(live.port, [rank(r) for r in range(8, 16)], [secret] * 8)
    finally:
        live.close()
    assert other_node["type"] == "reject" and "sent by the leader of 'nodeb'" in other_node["reason"], other_node
    assert unsigned["type"] == "reject" and refusals.AUTH in unsigned["reason"], unsigned
    assert too_many["type"] == "reject" and "local world size is 2" in too_many["reason"], too_many
    assert over_limit["type"] == "closed", "over LOCAL_MAX ranks: dropped as malformed"
    assert twice["type"] == "reject" and "one rank twice" in twice["reason"], twice
    assert honest["type"] == "ack", honest
    assert sorted(a.facts["launch"]["rank"] for a in live.c.arrivals.values()) == [0, *range(8, 16)]
    assert live.c.links() == (1, 0), "eight ranks over one connection"
    assert live.errors == []


def lead_texts(port: int, docs: list[dict[str, Any]], secret: bytes, swap: bool = False) -> tuple[dict[str, Any], int]:
    """Act as a node leader of this version: the ranks' texts, each distinct one once
    (validator/preflight/sections.py), each rank signed by itself. ``swap``: the leader then
    points the second rank's own text at the first's. The coordinator's reply, and the body's size."""
    s = hostile.connect(port)
    with s:
        nonce = str(hostile.reply(s).get("nonce", ""))
        texts = [sections.pieces(d) for d in docs]
        ranks = [
            (wire.mac(secret, nonce, "", sections.signed(t), f"tok{i}"), f"tok{i}", t) for i, t in enumerate(texts)
        ]
        fields, body = sections.frame(ranks, True, leader=True)
        if swap:
            fields["ranks"][1]["sections"][0] = fields["ranks"][0]["sections"][0]
        head = {"type": "facts", "proto": wire.PROTO, "job_id": "", "mac": ranks[0][0], "token": "tok0", "listen": None,
                **fields}  # fmt: skip
        s.sendall(wire.encode(head) + wire.frame(body))
        return hostile.reply(s), len(body)


def test_a_leaders_texts_each_once_and_a_leader_cannot_swap_them(port: int) -> None:
    """A node's 8 ranks in sections: the node's and the job's texts travel once, the coordinator
    holds them as one object for the 8 ranks, and a leader that points one rank at another
    rank's text (each is signed by its own rank) is refused whole."""
    env = two_nodes(port)
    own = pipeline.probe_local(environ=base_env(**env[0]), port_check=False)
    secret = b"s3cret"
    live = hostile.Live(own, set(range(16)), secret)

    def rank(r: int) -> dict[str, Any]:
        doc = json.loads(json.dumps(own))
        doc["host"], doc["pid"] = "nodeb", 100_000 + r
        doc["launch"].update(rank=r, local_rank=r % PER_NODE, local_world_size=PER_NODE)
        doc["env"].update(RANK=str(r), LOCAL_RANK=str(r % PER_NODE))
        return doc

    docs = [rank(r) for r in range(8, 16)]
    try:
        swapped, _ = lead_texts(live.port, docs, secret, swap=True)
        assert live.c is not None and len(live.c.arrivals) == 1, "nothing registered from a refused leader"
        honest, size = lead_texts(live.port, docs, secret)
        arrived = [a.facts for a in live.c.arrivals.values() if a.conn is not None]
    finally:
        live.close()
    assert swapped["type"] == "reject" and refusals.AUTH in swapped["reason"], swapped
    assert honest["type"] == "ack", honest
    whole = sum(len(json.dumps(d, separators=(",", ":"))) for d in docs)
    assert size < whole / 2, f"{size} bytes for ranks whose documents are {whole}"
    assert sorted(f["launch"]["rank"] for f in arrived) == list(range(8, 16))
    assert [f["env"]["RANK"] for f in sorted(arrived, key=lambda f: f["pid"])] == [str(r) for r in range(8, 16)]
    assert len({id(f["network"]) for f in arrived}) == 1 and len({id(f["software"]) for f in arrived}) == 1
    assert live.errors == []


def test_leader_refused_upstream_its_ranks_fall_back_before_the_deadline(tmp_path: Path, port: int) -> None:
    """Node b's leader holds the wrong secret: the coordinator refuses its whole frame, the leader
    closes its members' connections without a verdict, and they reach the coordinator directly."""
    envs = two_nodes(port, VALIDATOR_SECRET="s3cret")
    envs[8]["VALIDATOR_SECRET"] = "wrong"
    runs = preflight(tmp_path, envs, "--timeout", "12", "--hosts", "nodea,nodeb")
    assert runs[8].rc == 1 and "authentication failed" in runs[8].err, runs[8].err
    others = runs[:8] + runs[9:]
    assert {r.rc for r in others} == {3}, [r.err for r in others]
    assert [t for t, _ in outcomes(runs[0])] == ["rank 8"]
    assert "over 7 TCP connection(s) and 7 node-local" in verdict_line(runs[0])
    assert all(r.report == runs[0].report for r in others)


@pytest.mark.root
def test_two_namespace_hosts_of_eight_ranks(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    """The same 2 x 8 job on two network namespaces with their own hostnames (tests/conftest.py's
    netns_hosts): each node's abstract socket lives in its namespace; rank 11 is missing."""
    h = netns_hosts
    procs = []
    for n in range(2):
        for i in range(PER_NODE):
            rank = n * PER_NODE + i
            if rank == 11:
                continue
            env = base_env(RANK=str(rank), LOCAL_RANK=str(i), WORLD_SIZE=str(2 * PER_NODE), GROUP_RANK=str(n),
                           LOCAL_WORLD_SIZE=str(PER_NODE), MASTER_ADDR=h.addrs[0], MASTER_PORT="29831",
                           TORCHELASTIC_RUN_ID="aggns")  # fmt: skip
            out = tmp_path / f"ns{rank}.json"
            argv = [sys.executable, "-m", "validator", "preflight", "--timeout", "15", "--output", str(out),
                    "--hosts", ",".join(h.names[:2])]  # fmt: skip
            procs.append((start(h.exec(n, *argv), env, None), out, time.monotonic()))
    runs = collect(procs)
    assert {r.rc for r in runs} == {3}, [r.err[-2000:] for r in runs]
    reports = [json.loads(out.read_text()) for _, out, _ in procs]
    assert all(rep == reports[0] for rep in reports)
    assert [(o["target"], h.names[1] in o["detail"]) for o in reports[0]["outcomes"]] == [("rank 11", True)]
    assert "over 1 TCP connection(s) and 7 node-local" in verdict_line(runs[0])


SQUATTER = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(bytes.fromhex(sys.argv[1]))
s.listen(64)
s.settimeout(60)
print("ready", flush=True)
frames = bytes.fromhex(sys.argv[2])
held = []
while True:
    c, _ = s.accept()
    held.append(c)  # kept open: a rank that took this for its leader reads the forged verdict
    try:
        c.sendall(frames)
    except OSError:  # the rank hung up at once: it is not ours
        pass
"""


@pytest.mark.root
def test_another_users_socket_is_not_a_leader(tmp_path: Path, port: int) -> None:
    """User nobody holds node b's socket name first (an abstract name has no permissions) and
    hands out a forged pass: node b's ranks see it is not their user's and go to the coordinator."""
    from validator.preflight import local
    from validator.preflight.plan import Options, plan

    envs = two_nodes(port)
    facts = pipeline.probe_local(environ=base_env(**envs[9]), port_check=False)
    name = local.address(local.job_key(plan(Options(hosts="nodea,nodeb"), facts, None)), facts["host"])
    forged = {"type": "verdict", "exit_code": 0, "report": {}, "text": "FORGED VERDICT\n", "named": {}}
    frames = wire.encode({"type": "hello", "proto": wire.PROTO, "job_id": "agg", "nonce": "n", "deadline_in": 5.0})
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", SQUATTER,
            name.hex(), (frames + wire.encode(forged)).hex()]  # fmt: skip
    squatter = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "ready"
        runs = preflight(tmp_path, envs, "--timeout", "60", "--hosts", "nodea,nodeb", "--verbose")
    finally:
        squatter.kill()
        squatter.wait()
    assert [r.rc for r in runs] == [0] * 16, [r.err for r in runs if r.rc]
    assert not any("FORGED" in r.err for r in runs)
    line = verdict_line(runs[0])
    assert "PASSED: 16/16 ranks" in line and "over 8 TCP connection(s) and 7 node-local" in line, line
