"""Name resolution across peers (NET201-NET203) and clock skew (PRE008), measured by the preflight.

The decisions are tested on small fact factories and hand-made answers; the round itself runs for
real in network namespaces, each with its own /etc/hosts (a private mount namespace, as the
Kubernetes pod tests do), and through a hand-written participant for the clock (see below).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import factories as fx
from tests.conftest import VALIDATOR, NetnsHosts, free_port
from tests.harness import hostile
from tests.k8s.pods import SCRIPT, pod_etc
from tests.preflight.conftest import base_env, collect, ranks, start
from tests.preflight.test_hostile import agreed, own_body
from validator.docs import explain_text
from validator.model import Severity
from validator.preflight import participant, peers
from validator.preflight import protocol as wire
from validator.targets import expand

A, B, C = "node001", "node002", "node003"


def job(gpus: int = 0, **env: str) -> list[Any]:
    return [fx.facts(h, node=i, gpus=gpus, env=env if h == A else {}) for i, h in enumerate((A, B, C))]


def ok(*addrs: str) -> peers.View:
    return tuple(addrs), None


def views(**over: dict[str, peers.View]) -> dict[str, dict[str, peers.View]]:
    """Everyone resolves everyone to 10.0.0.N (node00N), except ``over`` (viewer -> name -> view)."""
    base = {v: {n: ok(f"10.0.0.{i + 1}") for i, n in enumerate((A, B, C))} for v in (A, B, C)}
    for v, got in over.items():
        base[v.replace("_", "")].update(got)
    return base


def codes(found: list[Any]) -> list[str]:
    return [f.code for f in found]


# --------------------------------------------------------------------------- decisions


def test_healthy_answers_are_silent() -> None:
    assert peers.findings(job(), views(), A) == []


def test_own_hostname_on_loopback_fires_naming_the_node_and_what_peers_see() -> None:
    (f,) = peers.findings(job(), views(node002={B: ok("127.0.1.1")}), A)
    assert f.code == "NET201" and f.hosts == [B] and f.severity == Severity.ERROR
    assert "127.0.1.1" in f.message and "10.0.0.2" in f.message, f.message


def test_own_hostname_on_loopback_is_a_warning_in_a_gpu_job() -> None:
    (f,) = peers.findings(job(gpus=8), views(node002={B: ok("127.0.1.1")}), A)
    assert f.code == "NET201" and f.severity == Severity.WARNING


def test_own_hostname_on_loopback_silent_when_gloo_has_its_interface() -> None:
    """Close but silent: Gloo does not use the hostname with GLOO_SOCKET_IFNAME set; nor does a
    loopback address listed after the routable one count (Gloo takes the first)."""
    assert peers.findings(job(GLOO_SOCKET_IFNAME="eth0"), views(node001={A: ok("127.0.1.1")}), A) == []
    assert peers.findings(job(), views(node002={B: ok("10.0.0.2", "127.0.1.1")}), A) == []


def test_drift_names_the_node_whose_view_differs() -> None:
    (f,) = peers.findings(job(), views(node003={B: ok("10.0.0.9")}), A)
    assert f.code == "NET202" and f.hosts == [C] and f.severity == Severity.WARNING
    assert "node003 -> 10.0.0.9" in f.message and "node002 has 10.0.0.2" in f.message, f.message


def test_drift_of_the_master_name_is_an_error_under_c10d() -> None:
    """torchrun's c10d rendezvous hands the workers the store host's hostname; with a static
    rendezvous on an address, the master's name is not what the job connects to."""
    c10d = [fx.tweak([f], 0, launch={**f["launch"], "rdzv_backend": "c10d"})[0] for f in job()]
    (f,) = peers.findings(c10d, views(node002={A: ok("10.0.0.9")}), A)
    assert f.code == "NET202" and f.hosts == [B] and f.severity == Severity.ERROR
    (g,) = peers.findings(job(), views(node002={A: ok("10.0.0.9")}), A)
    assert g.code == "NET202" and g.severity == Severity.WARNING


def test_drift_silent_when_every_answer_is_one_of_the_peers_addresses() -> None:
    """Close but silent: a multi-homed peer resolved to each of its own addresses is reached."""
    facts = fx.tweak(job(), 1, network={"interfaces": [fx.LO, fx.iface("eth0", "10.0.0.2/24", "10.1.0.2/24")]})
    assert peers.findings(facts, views(node003={B: ok("10.1.0.2")}), A) == []


def test_a_docker_bridge_address_is_not_the_peers() -> None:
    """Resolving a peer to 172.17.0.1 reaches one's own docker0, whatever the peer has there."""
    docker = fx.iface("docker0", "172.17.0.1/16", virtual=True, kind="bridge")
    facts = fx.tweak(job(), 1, network={"interfaces": [fx.LO, fx.iface("eth0", "10.0.0.2/24"), docker]})
    (f,) = peers.findings(facts, views(node003={B: ok("172.17.0.1")}), A)
    assert f.code == "NET202" and f.hosts == [C]


def test_drift_without_the_peers_address_goes_by_majority() -> None:
    """Nobody resolves the peer to an address it shows (NAT): the minority is named."""
    v = views(node001={C: ok("192.0.2.3")}, node002={C: ok("192.0.2.3")})
    v["node004"] = {C: ok("192.0.2.99")}
    (f,) = peers.findings([*job(), fx.facts("node004", node=3, gpus=0)], v, A)
    assert f.code == "NET202" and f.hosts == ["node004"], f


def test_unresolvable_peer_fires_where_others_resolve_it() -> None:
    (f,) = peers.findings(job(), views(node001={C: ((), "gaierror: Name or service not known")}), A)
    assert f.code == "NET203" and f.hosts == [A] and "Name or service not known" in f.message


def test_one_nodes_word_against_anothers_is_not_enough() -> None:
    """Hostile-safe: where no answer is one of the peer's own addresses, one node claiming a name
    resolves (or to something else) names nobody unless the master or most nodes agree with it."""
    gone = ((), "gaierror: Name or service not known")
    four = [*job(), fx.facts("node004", node=3, gpus=0)]
    assert peers.findings(four, {A: {C: gone}, B: {C: gone}, "node004": {C: ok("192.0.2.3")}}, B) == []
    assert peers.findings(job(), {A: {C: ok("192.0.2.3")}, B: {C: ok("192.0.2.4")}}, C) == [], "a tie, no master"
    (f,) = peers.findings(job(), {A: {C: ok("192.0.2.3")}, B: {C: ok("192.0.2.4")}}, B)
    assert f.code == "NET202" and f.hosts == [A], "the master's view breaks the tie"


def test_unresolvable_everywhere_is_silent() -> None:
    """Close but silent: a name no other node resolves either (a pod name without a headless
    Service) is not one the job uses."""
    gone = ((), "gaierror: Name or service not known")
    assert peers.findings(job(), views(node001={C: gone}, node002={C: gone}), A) == []


def test_a_report_about_others_never_names_the_peer() -> None:
    """Hostile-safe: one node claiming strange things about everyone is named itself, only."""
    lies = {n: ok("203.0.113.1") for n in (A, B, C)}
    found = peers.findings(job(), views(node003=lies), A)
    assert found and all(f.hosts == [C] for f in found), found


def test_answers_are_validated() -> None:
    msg = {"type": "resolved", "results": {A: {"addrs": ["10.0.0.1", "not an ip", 7], "error": None},
           B: {"addrs": "x"}, "evil": {"addrs": ["10.9.9.9"]}, C: {"addrs": [], "error": "e" * 5000}}}  # fmt: skip
    got = peers.parse_answer(msg, [A, B, C])
    assert got[A] == (("10.0.0.1",), None) and B not in got and "evil" not in got
    assert got[C][0] == () and len(got[C][1] or "") < 130
    assert peers.parse_answer({"type": "netcheck"}, [A]) == {}


def test_participant_answers_only_hostname_like_names_at_most_sample_max() -> None:
    """Names DNS would have to answer (here it cannot: 5 s each) come back with an error, within
    RESOLVE_S for all of them together (the agent's bounded resolver)."""
    got = participant.resolved({"type": "resolve", "names": ["localhost", "-rf", "a b", *[f"n{i}" for i in range(40)]]})
    assert "-rf" not in got["results"] and "a b" not in got["results"]
    assert len(got["results"]) == participant.SAMPLE_MAX - 2 and got["results"]["localhost"]["addrs"]
    assert all(r["error"] for n, r in got["results"].items() if n != "localhost")


def test_sample_is_bounded_and_holds_neighbours_and_master() -> None:
    names = [f"n{i}" for i in range(100)]
    import random

    s = peers.sample(names, 50, random.Random(1))
    assert len(s) == participant.SAMPLE_MAX and s[:4] == ["n50", "n49", "n51", "n0"]
    assert peers.sample(names[:3], 1, random.Random(1)) == ["n1", "n0", "n2"]


def test_clock_offset_beyond_the_round_trip_fires() -> None:
    off = peers.offset(1000.0 + 5.0, 10.0, 10.2, 1000.0)
    assert off is not None and abs(off[0] - 5.1) < 1e-9 and abs(off[1] - 0.2) < 1e-9
    assert peers.offset(True, 0, 0, 0) is None and peers.offset(float("nan"), 0, 0, 0) is None


def test_explain_covers_the_new_codes() -> None:
    for code in ("NET201", "NET202", "NET203", "PRE008"):
        text = explain_text(code)
        assert text.startswith(code) and "How to fix" in text


# --------------------------------------------------------------------------- the round, for real


def hosts_file(h: NetnsHosts, lines: dict[int, str | None]) -> str:
    """/etc/hosts listing every namespace host at its address; ``lines`` overrides host i's line
    (None: no line for it)."""
    out = "127.0.0.1\tlocalhost\n"
    for i, name in enumerate(h.names[:3]):
        line = lines.get(i, f"{h.addrs[i]}\t{name}")
        out += f"{line}\n" if line else ""
    return out


def run_three(
    h: NetnsHosts,
    tmp: Path,
    tag: str,
    etc: dict[int, dict[int, str | None]],
    *args: str,
    errs: list[str] | None = None,
    env: dict[int, dict[str, str]] | None = None,
    nodes: int = 3,
) -> list[dict[str, Any]]:
    """`validator preflight ARGS` on the first three namespace hosts (node ranks 0-2, master 0),
    each with its own /etc/hosts (``etc``: node -> its overrides); every node's report (and its
    stderr appended to ``errs``)."""
    port = free_port()
    procs = []
    for i in range(nodes):
        d = tmp / f"{tag}{i}"
        d.mkdir()
        pod_etc(d / "etc", hosts_file(h, etc.get(i, {})))
        out = d / "report.json"
        node_env = base_env(RANK=str(i), LOCAL_RANK="0", WORLD_SIZE="3", GROUP_RANK=str(i),
                            MASTER_ADDR=h.addrs[0], MASTER_PORT=str(port), **(env or {}).get(i, {}))  # fmt: skip
        cmd = ["ip", "netns", "exec", h.names[i], "unshare", "--mount", "--uts", "--", "sh", "-c", SCRIPT,
               h.names[i], str(d / "etc"), sys.executable, "-m", "validator", "preflight", "--timeout", "30",
               "--output", str(out), *args]  # fmt: skip
        procs.append(
            (subprocess.Popen(cmd, env=node_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out)
        )
    reports = []
    for proc, out in procs:
        try:
            _, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        assert out.exists(), err[-2000:]
        if errs is not None:
            errs.append(err)
        reports.append(json.loads(out.read_text()))
    assert all(r == reports[0] for r in reports), "one verdict for everyone"
    return reports


def found(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["code"] == code]


def test_names_across_namespaces(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    h = netns_hosts
    errs: list[str] = []
    healthy = run_three(h, tmp_path, "ok", {}, errs=errs)[0]
    assert not [f for f in healthy["findings"] if f["code"].startswith(("NET20", "PRE008"))], healthy["findings"]
    assert "names: 3 hosts resolved their peers in" in errs[0], "the coordinator's verdict line says the round ran"

    # a GPU job (its launch names nccl; NCCL_* alone would not do): NCCL's interface is fine, but its
    # gloo groups would advertise loopback. No GPU here: GPU001 is ignored, so the round still runs
    nccl = ("--ignore", "GPU001", "--", sys.executable, "-c", "pass", "--backend", "nccl")
    loop = run_three(h, tmp_path, "lo", {1: {1: f"127.0.1.1\t{h.names[1]}"}}, *nccl)[0]
    (f,) = found(loop, "NET201")
    assert expand(f["hosts"]) == [h.names[1]] and "127.0.1.1" in f["message"] and f["severity"] == "warning"
    assert h.addrs[1] in f["message"], "what its peers resolve it to, and its own address"
    # a CPU job: the facts already say Gloo would use loopback there (NET003); NET201 does not repeat it
    cpu = run_three(h, tmp_path, "lc", {1: {1: f"127.0.1.1\t{h.names[1]}"}})[0]
    (n,) = found(cpu, "NET003")
    assert expand(n["hosts"]) == [h.names[1]] and not found(cpu, "NET201")

    # node 2 has a stale line for node 1; node 0 has no line for node 2
    bad = run_three(h, tmp_path, "dr", {2: {1: f"10.250.99.99\t{h.names[1]}"}, 0: {2: None}})[0]
    (d,) = found(bad, "NET202")
    assert expand(d["hosts"]) == [h.names[2]] and "10.250.99.99" in d["message"] and h.names[1] in d["message"]
    (u,) = found(bad, "NET203")
    assert expand(u["hosts"]) == [h.names[0]] and h.names[2] in u["message"]
    assert not found(bad, "NET201")

    # an early verdict (a setting that must match differs, the third node never comes) does not wait
    # for the round
    errs = []
    drift = {0: {"TORCH_DISTRIBUTED_DEBUG": "OFF"}, 1: {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}}
    early = run_three(h, tmp_path, "ea", {}, "--timeout", "8", errs=errs, env=drift, nodes=2)[0]
    assert "ENV002" in {f["code"] for f in early["findings"]} and "decided at" in errs[0], errs[0][-2000:]
    assert "names:" not in errs[0]


# --------------------------------------------------------------------------- clock skew, through the wire


@pytest.mark.parametrize("skew", [5.0, 0.3])
def test_clock_skew_from_the_header(tmp_path: Path, port: int, skew: float) -> None:
    """No real way exists here to skew one process's wall clock (a time namespace offsets only the
    monotonic and boot clocks; faketime is not installed): rank 1 is this test process, speaking
    the protocol as a participant does with its clock ``skew`` seconds ahead in the header."""
    envs = ranks(2, port)
    proc = start([*VALIDATOR, "preflight", "--timeout", "30"], base_env(**envs[0]), tmp_path / "r0.json")
    body = own_body(envs[1])
    s, ack, _ = hostile.register(port, body, "", "token-1", None, clock=time.time() + skew)
    assert ack["type"] == "ack", ack
    s.settimeout(60)
    verdict = hostile.final_verdict(s)
    s.close()
    (run,) = collect([(proc, tmp_path / "r0.json", time.monotonic())])
    report = agreed([run])
    assert verdict["report"] == report
    pre = found(report, "PRE008")
    if skew > peers.SKEW_S:
        assert len(pre) == 1 and pre[0]["severity"] == "warning", pre
        shown = float(pre[0]["actual"].split()[0])  # our clock was read before connecting: a little less
        assert skew - 1.0 < shown <= skew + 0.05, pre
    else:
        assert not pre, pre


def test_one_machine_under_several_node_names_is_asked_once() -> None:
    """Emulated Slurm nodes n1, n2 on this machine share its kernel hostname: one machine, no round
    (loopback works there; NET003 judges the same way)."""
    from validator.preflight.connection import Arrival

    one = [fx.facts("n1", node=0, gpus=0, hostname="vm"), fx.facts("n2", node=1, gpus=0, hostname="vm")]
    assert len(peers.nodes([Arrival(f, None) for f in one], lambda f: f["pid"])) == 1
    two = job()[:2]
    assert [a.facts["host"] for a in peers.nodes([Arrival(f, None) for f in reversed(two)], lambda f: f["pid"])] == [
        A,
        B,
    ]


@pytest.mark.parametrize("answer", ["lies", "oversized", "silent"])
def test_hostile_answers_name_only_their_sender(tmp_path: Path, port: int, answer: str) -> None:
    """Rank 1 is this test process on another "machine" (its facts claim another hostname), and
    answers the name round with lies about the master, an oversized frame, or nothing: the master is
    never named by them, and everyone gets the verdict (a node that never answers is waited for
    ROUND_S only)."""
    envs = ranks(2, port)
    proc = start([*VALIDATOR, "preflight", "--timeout", "30"], base_env(**envs[0]), tmp_path / "r0.json")
    facts = json.loads(own_body(envs[1]))
    master = facts["hostname"]
    facts["hostname"] = facts["host"] = "evil-host"
    s, ack, _ = hostile.register(port, json.dumps(facts).encode(), "", "token-1", None, clock=time.time())
    assert ack["type"] == "ack", ack
    s.settimeout(60)
    ask = wire.recv_msg(s)
    assert ask["type"] == "resolve" and set(ask["names"]) == {master, "evil-host"}, ask
    if answer == "lies":
        lies = {master: {"addrs": ["203.0.113.1"]}, "evil-host": {"addrs": ["127.0.1.1"]}, "x": {"addrs": ["1.2.3.4"]}}
        s.sendall(wire.encode({"type": "resolved", "results": lies}))
    elif answer == "oversized":
        s.sendall(wire.encode({"type": "resolved", "results": {master: {"addrs": ["10.0.0.1"] * 20_000}}}))
    try:
        verdict: dict[str, Any] | None = hostile.final_verdict(s)
    except (OSError, wire.ProtocolError):
        verdict = None  # dropped for its frame
    s.close()
    (run,) = collect([(proc, tmp_path / "r0.json", time.monotonic())])
    assert run.report is not None and "Traceback" not in run.err, run.err[-2000:]
    # about others, evidence only: no NET202/NET203 (one view of each name); NET201 is each machine's
    # own view (this machine's own hostname may resolve to loopback, as here: 127.0.0.1 vm)
    assert not [f for f in run.report["findings"] if f["code"] in ("NET202", "NET203")], run.report["findings"]
    own = {h for f in run.report["findings"] if f["code"] == "NET201" for h in expand(f["hosts"])}
    said = {h for f in run.report["findings"] if f["code"] == "NET003" for h in expand(f["hosts"])}
    if answer == "lies":  # its own view of itself: NET201, unless NET003 already says so from its facts
        assert "evil-host" in own | said, run.report["findings"]
    else:
        assert "evil-host" not in own, run.report["findings"]
    if answer == "oversized":
        assert verdict is None, "dropped for its frame"
    else:
        assert verdict is not None and verdict["report"] == run.report


def test_net201_defers_to_net003_for_the_same_hosts() -> None:
    """In a CPU job the facts already say Gloo would use loopback (NET003): NET201 for the same node
    is the same cause, said once; for a node NET003 does not name, NET201 stays."""
    from validator.preflight.findings import own_loopback
    from validator.registry import registry

    net003 = registry()["NET003"].finding("gloo would use lo", hosts=["n1"])
    on_n1 = own_loopback.finding("n1 -> 127.0.1.1", hosts=["n1"])
    on_n2 = own_loopback.finding("n2 -> 127.0.1.1", hosts=["n1", "n2"])
    assert peers.defer([on_n1, on_n2], [net003]) == [on_n2]
    assert peers.defer([on_n1], []) == [on_n1]


def test_with_a_secret_the_names_round_and_the_net_check_are_sealed_and_run(
    netns_hosts: NetnsHosts, tmp_path: Path
) -> None:
    """With VALIDATOR_SECRET, the coordinator's resolve and probe requests each come with their
    seal (protocol.py), and the ranks act on them: the same healthy job passes, both rounds ran."""
    errs: list[str] = []
    secret = {i: {"VALIDATOR_SECRET": "peers-secret"} for i in range(3)}
    run_three(netns_hosts, tmp_path, "sec", {}, "--net-check", errs=errs, env=secret)
    line = errs[0].strip().splitlines()[-1]  # the coordinator's verdict line
    assert "preflight PASSED" in line and "net check: 3 links, all within 3x" in line, errs[0][-2000:]
    assert "names: 3 hosts resolved their peers in" in line, line


def test_the_coordinators_clock_alone_off_names_the_coordinator() -> None:
    """Only the coordinator's clock is 30 s ahead: every other node's header reads 30 s behind it. They agree on
    another time, so the coordinator's node is named, not all of them (it named every healthy node)."""
    from validator.preflight.connection import Arrival

    own = fx.facts("n0", node=0, gpus=0, hostname="n0")
    others = [fx.facts(f"n{i}", node=i, gpus=0, hostname=f"n{i}") for i in (1, 2, 3)]
    arrivals = [Arrival(own, None), *(Arrival(f, object(), clock=(-30.0, 0.002)) for f in others)]  # type: ignore[arg-type]
    (pre,) = peers.clock_findings(arrivals, "n0")
    assert pre.hosts == ["n0"] and pre.actual == "+30.0 s" and "other nodes' median" in pre.message
    # one node off while the others agree with the coordinator: that node
    arrivals[1] = Arrival(others[0], object(), clock=(12.0, 0.002))  # type: ignore[arg-type]
    arrivals[2] = Arrival(others[1], object(), clock=(0.1, 0.002))  # type: ignore[arg-type]
    arrivals[3] = Arrival(others[2], object(), clock=(0.0, 0.002))  # type: ignore[arg-type]
    (pre,) = peers.clock_findings(arrivals, "n0")
    assert pre.hosts == ["n1"] and pre.actual == "+12.0 s" and "coordinator's (n0)" in pre.message
