"""The net check's planner and its decisions (validator/netcheck/), on rows shaped like the
prober's. The prober itself runs for real below (listeners on loopback addresses) and between
namespace hosts in tests/preflight/test_netcheck_speed.py and tests/scan/test_netcheck_faults.py
(planted delay, loss and rate faults, and healthy runs that must name nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from validator.netcheck import probe, ring, rounds, verdict
from validator.netcheck.ring import Node, plan, stride
from validator.preflight.refusals import netcheck_rows


def nodes(n: int) -> list[Node]:
    return [Node(f"n{i}", f"h{i}", f"10.0.0.{i + 1}", "eth0", 1000 + i, f"t{i}") for i in range(n)]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8, 9, 64, 201])
def test_plan_gives_each_node_two_rings_and_measures_each_pair_once(n: int) -> None:
    plans = plan(nodes(n))
    measured = [frozenset((s, t["label"])) for s, ts in plans.items() for t in ts if t["measure"]]
    assert len(measured) == len(set(measured))  # each pair once
    peers: dict[str, set[str]] = {}
    for pair in measured:
        a, b = sorted(pair)
        peers.setdefault(a, set()).add(b)
        peers.setdefault(b, set()).add(a)
    want = 1 if n == 2 else 2 if n == 3 else 3 if n == 4 else 4
    assert {len(p) for p in peers.values()} == {want}  # two neighbours on each ring
    assert all(len(ts) <= 3 for ts in plans.values())  # bounded per prober, whatever n
    first = {s for s, ts in plans.items() for t in ts if t["label"] == "n0"} | {t["label"] for t in plans["n0"]}
    assert first == {f"n{i}" for i in range(1, n)}  # everyone reaches the first node
    assert stride(n) not in (1, n - 1) or n < 4


def test_four_nodes_make_the_six_probes_scan_has_always_reported() -> None:
    assert len(ring.rows({s: [{"ok": True}] * len(ts) for s, ts in plan(nodes(4)).items()})) == 6


def test_suspects_are_measured_alone_one_link_a_round_and_in_disjoint_batches_at_scale() -> None:
    plans = plan(nodes(64))
    links = {(s, t["label"]) for s, ts in plans.items() for t in ts if t["measure"]}
    few = set(sorted(links)[:5])
    batches = ring.alone(plans, sorted(few), 24)
    assert [len(ring.rows(b)) for b in batches] == [1] * 5  # one link alone in each round
    assert {(s, t["label"]) for b in batches for s, ts in b.items() for t in ts} == few
    many = ring.alone(plans, sorted(links), 24)  # 128 links: at most 24 rounds, no node twice in a round
    assert len(many) <= 24
    assert sum(len(ring.rows(b)) for b in many) == len(links)
    for b in many:
        ends = [e for s, ts in b.items() for t in ts for e in (s, t["label"])]
        assert len(ends) == len(set(ends))
    crowd = set(sorted(links)[:100])  # many suspects: shared rounds, a control measured in most of them
    shared = rounds.confirmation(plans, crowd, crowd)
    measured_in = [{(s, t["label"]) for s, ts in b.items() for t in ts} for b in shared]
    assert set().union(*measured_in) >= crowd and len(shared) <= 30
    assert sum(1 for m in measured_in if m - crowd) >= 20


def row(label: str, rtt: float = 0.1, up: float = 5000.0, down: float = 5000.0, **kw: Any) -> dict[str, Any]:
    return {"label": label, "ok": True, "error": None, "rtt_ms": rtt, "up_mbps": up, "down_mbps": down,
            "retrans": [0, 100], **kw}  # fmt: skip


def rows_of(plans: ring.Plans, figures: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """Rows as the prober returns them: figures on measured links only."""
    return {s: [row(t["label"], **figures.get((s, t["label"]), {})) if t["measure"] else
                {"label": t["label"], "ok": True, "error": None} for t in ts] for s, ts in plans.items()}  # fmt: skip


def decide(n: int, first: dict[tuple[str, str], dict[str, Any]], *again: dict[tuple[str, str], dict[str, Any]]) -> Any:
    """The findings when the first round measures ``first`` and each confirmation ``again``
    (measured alone, as rounds.run does: only the links still suspect)."""
    r1 = rows_of(plan(nodes(n)), first)
    redo, confirms = verdict.suspects(r1), []
    for figures in again:
        batches = rounds.confirmation(plan(nodes(n)), verdict.suspects(r1), redo)
        got: dict[str, Any] = {}
        for b in batches:
            ring.merge(got, rows_of(b, figures))
        confirms.append(got)
        redo = verdict.suspects(r1, confirms[-1])
    return {(f.code, tuple(f.hosts)) for f in verdict.slow_findings(verdict.by_label(nodes(n)), r1, *confirms)}


SLOW = {"up": 50.0}


def test_a_node_whose_links_are_all_slow_is_named_as_the_node() -> None:
    ends = [(s, t["label"]) for s, ts in plan(nodes(8)).items() for t in ts if t["measure"]]
    links = {link: SLOW for link in ends if "n2" in link}
    assert len(links) == 4  # n1, n3 on ring 1; n7, n5 on ring 2 (stride 3)
    assert decide(8, links, links, links) == {("NET105", ("h2",))}
    three = dict(list(links.items())[:3])  # three of its four links: still the node
    assert decide(8, three, three, three) == {("NET105", ("h2",))}


def test_one_slow_link_is_named_as_the_pair() -> None:
    links = {("n1", "n2"): {"down": 100.0}}
    assert decide(8, links, links, links) == {("NET104", ("h1", "h2"))}


def test_two_slow_links_sharing_a_node_are_two_pairs_not_the_node() -> None:
    links = {("n1", "n2"): SLOW, ("n2", "n3"): SLOW}  # its ring-2 links are fine: not the node
    assert decide(8, links, links, links) == {("NET104", ("h1", "h2")), ("NET104", ("h2", "h3"))}


def test_latency_and_loss_and_a_broken_transfer_are_slow_links() -> None:
    assert decide(6, {("n0", "n1"): {"rtt": 5.0}}, {("n0", "n1"): {"rtt": 4.0}}, {("n0", "n1"): {"rtt": 4.5}}) == {
        ("NET104", ("h0", "h1"))
    }
    lossy = {("n0", "n1"): {"retrans": [30, 2900]}}
    assert decide(6, lossy, lossy, lossy) == {("NET104", ("h0", "h1"))}
    broke = {("n0", "n1"): {"lost": True, "error": "reset"}}
    assert decide(6, broke, broke, broke) == {("NET104", ("h0", "h1"))}


@pytest.mark.parametrize(
    ("first", "again"),
    [
        pytest.param({"up": 1700.0}, {"up": 1700.0}, id="2.9x-slower"),
        pytest.param({"rtt": 0.9}, {"rtt": 0.9}, id="9x-latency-but-under-1ms-more"),
        pytest.param(SLOW, {}, id="slow-once-then-fine"),
        pytest.param({}, SLOW, id="fine-then-slow"),
        pytest.param({"retrans": [1, 200]}, {"retrans": [1, 200]}, id="0.5%-retransmitted"),
        pytest.param({"retrans": [2, 100]}, {"retrans": [2, 100]}, id="2%-but-only-2-segments"),
        pytest.param({"rtt": 2.7}, {"rtt": 0.05}, id="loopback-spike-gone-alone"),
    ],
)
def test_close_but_not_slow_stays_silent(first: dict[str, Any], again: dict[str, Any]) -> None:
    assert decide(8, {("n1", "n2"): first}, {("n1", "n2"): again}, {("n1", "n2"): again}) == set()


def test_a_suspect_must_be_slow_in_every_alone_measurement() -> None:
    slow = {("n1", "n2"): SLOW}
    assert decide(8, slow, slow, {}) == set()  # slow alone once, then fine: contention, not the link
    assert decide(8, slow) == set()  # never confirmed: nothing named
    assert decide(8, slow, slow, slow) == {("NET104", ("h1", "h2"))}


def test_rates_must_be_under_the_absolute_floor_too() -> None:
    # the busy-machine dip of issue 21 (2,089 against 17,329 Mbit/s) is under both: the alone
    # confirmation filters it; a fast fabric's 8,000 against 40,000 is over the floor: never suspect
    med = {"rtt_ms": 0.02, "up_mbps": 40_000.0, "down_mbps": 40_000.0, "loss": 0.0}
    assert verdict.why_slow(row("x", up=8_000.0, down=40_000.0, rtt=0.02), med) == []
    assert verdict.why_slow(row("x", up=4_900.0, down=40_000.0, rtt=0.02), med) != []


def test_clean_summary_carries_medians_spread_and_the_passing_line() -> None:
    r1 = rows_of(plan(nodes(8)), {("n1", "n2"): {"rtt": 0.3}})
    doc = verdict.summary_doc(r1, 8, 0, 0, [])
    assert (doc["probes"], doc["measured"], doc["failed"]) == (19, 16, 0)
    assert doc["rtt_ms"] is not None and doc["up_mbps"] is not None
    assert (doc["rtt_ms"]["median"], doc["rtt_ms"]["max"], doc["up_mbps"]["median"]) == (0.1, 0.3, 5000.0)
    assert doc["line"].startswith(
        "net check: 16 links, all within 3x of the median link (3 more reached); median 0.10 ms, 5000/5000"
    )
    named = verdict.summary_doc(r1, 8, 2, 1, [verdict.codes.slow_link.finding("x", hosts=["h1", "h2"])])
    assert "1 named (NET104)" in named["line"] and "2 re-measured alone, 1 confirmed" in named["line"]


def test_just_over_the_factor_is_named() -> None:
    assert decide(8, *[{("n1", "n2"): {"up": 1600.0}}] * 3) == {("NET104", ("h1", "h2"))}


def test_too_few_links_to_have_a_median_decide_nothing() -> None:
    assert decide(2, {("n0", "n1"): SLOW}, {("n0", "n1"): SLOW}) == set()


def test_bulk_floor_keeps_a_fast_fabric_quiet_within_timing_noise() -> None:
    # 4 MB at 100 Gbit/s takes 0.3 ms; at 30 Gbit/s 1.1 ms: 3.3x slower, 0.8 ms longer -> noise here
    med = {"rtt_ms": 0.01, "up_mbps": 100_000.0, "down_mbps": 100_000.0, "loss": 0.0}
    assert verdict.why_slow(row("x", up=30_000.0, down=100_000.0, rtt=0.01), med) == []
    assert verdict.why_slow(row("x", up=3_000.0, down=100_000.0, rtt=0.01), med) != []


def test_unreachable_destination_names_it_when_every_prober_fails() -> None:
    ns = nodes(4)
    plans = plan(ns)
    res = {s: [dict(row(t["label"]), ok=t["label"] != "n3", error="no route") for t in ts] for s, ts in plans.items()}
    found = verdict.reach_findings(verdict.by_label(ns), plans, res)
    assert [(f.code, f.hosts) for f in found] == [("NET101", ["h3"])]
    assert "h1 -> h3" in found[0].message and "h2 -> h3" in found[0].message


def test_prober_that_did_not_run_and_unbindable_address_are_reported() -> None:
    ns = nodes(3)
    ns[1].error, ns[1].bind = "cannot listen on 10.0.0.2: Cannot assign requested address", True
    plans = plan(ns)
    res: dict[str, Any] = {s: "the prober did not finish within 9 s" for s in plans}
    codes = sorted(f.code for f in verdict.reach_findings(verdict.by_label(ns), plans, res))
    assert codes == ["NET102", "NET103"]


def test_real_probes_on_loopback_measure_and_check_the_token() -> None:
    lst = [probe.Listener([f"127.0.0.{i}"]) for i in (2, 3, 4)]
    try:
        targets = [{"label": str(i), "addr": x.bound[0], "port": x.port, "token": x.token, "measure": True}
                   for i, x in enumerate(lst)]  # fmt: skip
        targets.append({"label": "impostor", "addr": "127.0.0.2", "port": lst[0].port, "token": "0" * 16})
        targets.append({"label": "garbage", "addr": "127.0.0.2", "port": "80; rm -rf /", "token": None})
        rows = probe.probe(targets, 3.0)
    finally:
        for x in lst:
            x.close()
    for r in rows[:3]:
        assert r["ok"] and r["up_bytes"] > 0 and r["down_bytes"] > 0 and r["rtt_ms"] > 0, r
    assert not rows[3]["ok"] and "token" in rows[3]["error"]
    assert not rows[4]["ok"] and "no listener address" in rows[4]["error"]
    kept = netcheck_rows({"type": "netcheck", "results": [*rows, {"label": "x", "ok": "yes", "error": None}]})
    assert [r["label"] for r in kept] == ["0", "1", "2", "impostor", "garbage"]  # the malformed row is dropped
    assert kept[0]["up_mbps"] == rows[0]["up_mbps"]


def test_a_confirmation_compares_with_controls_measured_alone_when_they_are_more_lenient() -> None:
    """200 emulated hosts in one process (benchmarks/netcheck_scale.py): the contended first round's
    median is a burst-inflated 16,141 Mbit/s; alone, a suspect moves 2,446 and so do the controls."""
    ns = nodes(8)
    plans = plan(ns)
    busy = {(s, t["label"]): {"up": 16_141.0} for s, ts in plans.items() for t in ts if t["measure"]}
    busy[("n1", "n2")] = {"up": 2_000.0}
    r1 = rows_of(plans, busy)
    assert verdict.suspects(r1) == {("n1", "n2")}
    picked = ring.controls(plans, {("n1", "n2")}, verdict.CONTROLS)
    assert len(picked) == 3 and not any({"n1", "n2"} & set(link) for link in picked)
    batches = rounds.confirmation(plans, {("n1", "n2")}, {("n1", "n2")})
    assert [len(ring.rows(b)) for b in batches] == [1, 1, 1, 1]  # the suspect and 3 controls, each alone

    def confirm(suspect_up: float) -> dict[str, Any]:
        got: dict[str, Any] = {}
        for p in batches:
            ring.merge(got, rows_of(p, {link: {"up": 2_446.0} for link in busy} | {("n1", "n2"): {"up": suspect_up}}))
        return got

    assert verdict.suspects(r1, confirm(2_446.0)) == set()
    assert verdict.slow_findings(verdict.by_label(ns), r1, confirm(2_446.0), confirm(2_446.0)) == []
    assert verdict.suspects(r1, confirm(90.0)) == {("n1", "n2")}  # a real fault is slow against either
