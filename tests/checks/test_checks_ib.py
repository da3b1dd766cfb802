"""IB: checks over facts whose ib section the agent's real collector read from sysfs trees built
of public ibstat/show_gids outputs (tests/fixtures/ib, tests/ibtree.py), parsed by NCCL's rules."""

from __future__ import annotations

from pathlib import Path

from tests.factories import check, cpu_job, fires, node_job, only, tweak
from tests.ibtree import ib_facts
from validator.model import Facts, Severity

HDR, ROCE = "ibstat-ib-hdr.txt", "ibstat-roce-200.txt"  # HDR: mlx5_0 up, mlx5_1 down; RoCE: both up
POD = "show_gids-pod-macvlan.txt"  # RoCE GIDs of mlx5_0 and mlx5_1 at indices 4-7 (net1, net2)
Node = tuple[str, dict[str, str], dict[str, str | None]]  # fixture, NCCL env, sysfs changes


def node(fixture: str = ROCE, env: dict[str, str] | None = None, **change: str | None) -> Node:
    return fixture, env or {}, {k.replace("__", "/"): v for k, v in change.items()}


def job_of(tmp_path: Path, *nodes: Node, cpu: bool = False, gids: tuple[str, ...] = ()) -> list[Facts]:
    """One wrapper agent per node (node001, node002, ...), each with its own sysfs tree."""
    base = cpu_job(len(nodes), 1) if cpu else node_job(len(nodes))
    out = []
    for n, (f, (fixture, env, change)) in enumerate(zip(base, nodes, strict=True)):
        ib = ib_facts(tmp_path / f"n{n}", fixture, *gids, env=env, change=change)
        out.append(tweak([f], 0, ib=ib, env=env)[0])
    return out


DOWN = {"mlx5_1/ports/1/state": "1: DOWN", "mlx5_1/ports/1/phys_state": "3: Disabled"}


@fires("IB001")
def test_ib_disabled_on_one_node_only(tmp_path: Path) -> None:
    f = only(check(job_of(tmp_path, node(), node(), node(env={"NCCL_IB_DISABLE": "1"})), "IB001"))
    assert f.hosts == ["node003"]
    assert (f.expected, f.actual, f.severity) == ("IB", "Socket", Severity.ERROR)
    assert "NCCL_IB_DISABLE=1" in f.message


@fires("IB001")
def test_node_whose_only_port_is_down_falls_back_to_sockets(tmp_path: Path) -> None:
    down = {"mlx5_0/ports/1/state": "1: DOWN"}
    f = only(check(job_of(tmp_path, node(HDR), (HDR, {}, down), node(HDR)), "IB001"))
    assert f.hosts == ["node002"]
    assert "no active RDMA port" in f.message


@fires("IB001")
def test_nccl_net_ib_on_a_node_without_an_active_port_fails_there(tmp_path: Path) -> None:
    env = {"NCCL_NET": "IB"}
    job = job_of(tmp_path, node(HDR, env), (HDR, env, {"mlx5_0/ports/1/state": "1: DOWN"}), node(HDR, env))
    f = only(check(job, "IB001"))
    assert f.hosts == ["node002"] and f.actual == "none"
    assert f.message == "NCCL would fail (no active RDMA port) where the other nodes use IB"


def test_ib_disabled_everywhere_is_consistent(tmp_path: Path) -> None:
    env = {"NCCL_IB_DISABLE": "1"}
    assert check(job_of(tmp_path, node(env=env), node(env=env)), "IB001") == []


def test_cpu_job_ignores_rdma(tmp_path: Path) -> None:
    # no GPUs, no NCCL variable (either would make it a GPU job): gloo never uses verbs
    job = job_of(tmp_path, node(), (HDR, {}, {"mlx5_0/ports/1/state": "1: DOWN"}), cpu=True)
    assert [c for c in ("IB001", "IB003", "IB004", "IB005") if check(job, c)] == []


@fires("IB002")
def test_hca_list_naming_nothing_present_falls_back_silently(tmp_path: Path) -> None:
    env = {"NCCL_IB_HCA": "=mlx5_2,mlx5_3"}
    f = only(check(job_of(tmp_path, node(env=env), node(env=env)), "IB002"))
    assert f.severity == Severity.WARNING and f.hosts == ["node001", "node002"]
    assert "active: mlx5_0:1,mlx5_1:1" in f.message and "No device found" in f.message


@fires("IB002")
def test_hca_list_naming_nothing_with_nccl_net_ib_fails(tmp_path: Path) -> None:
    f = only(check(job_of(tmp_path, node(env={"NCCL_IB_HCA": "mlx6", "NCCL_NET": "IB"})), "IB002"))
    assert f.severity == Severity.ERROR
    assert "Failed to initialize any NET plugin" in f.message


def test_hca_prefix_that_matches_is_silent(tmp_path: Path) -> None:
    env = {"NCCL_IB_HCA": "mlx5_1:1"}  # a prefix with a port
    assert check(job_of(tmp_path, node(env=env), node(env=env)), "IB002") == []


@fires("IB003")
def test_one_node_pinned_to_fewer_hcas(tmp_path: Path) -> None:
    f = only(check(job_of(tmp_path, node(), node(env={"NCCL_IB_HCA": "=mlx5_0"}), node()), "IB003"))
    assert f.hosts == ["node002"] and f.severity == Severity.ERROR
    assert (f.expected, f.actual) == ("mlx5_0:1,mlx5_1:1", "mlx5_0:1")


@fires("IB003")
def test_same_count_other_names_is_a_warning(tmp_path: Path) -> None:
    zero, one = {"NCCL_IB_HCA": "=mlx5_0"}, {"NCCL_IB_HCA": "=mlx5_1"}
    f = only(check(job_of(tmp_path, node(env=zero), node(env=zero), node(env=one)), "IB003"))
    assert f.hosts == ["node003"] and f.severity == Severity.WARNING


def test_set_smaller_only_by_a_down_port_is_left_to_ib004(tmp_path: Path) -> None:
    job = job_of(tmp_path, node(), (ROCE, {}, dict(DOWN)), node())
    assert check(job, "IB003") == []
    assert only(check(job, "IB004")).hosts == ["node002"]


@fires("IB004")
def test_port_up_on_the_peers_is_down_here(tmp_path: Path) -> None:
    f = only(check(job_of(tmp_path, node(), (ROCE, {}, dict(DOWN)), node()), "IB004"))
    assert f.hosts == ["node002"]
    assert f.message.startswith("mlx5_1:1 is DOWN/Disabled (used on 2 of 3 nodes)")
    assert f.actual == "DOWN/Disabled"


@fires("IB004")
def test_port_named_in_nccl_ib_hca_is_down(tmp_path: Path) -> None:
    f = only(check(job_of(tmp_path, node(HDR, {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"})), "IB004"))
    assert "mlx5_1:1" in f.message and "named by NCCL_IB_HCA" in f.message


def test_port_down_everywhere_and_not_named_is_an_unused_port(tmp_path: Path) -> None:
    # mlx5_1 is down on every node (as in the captured ibstat): nobody uses it, nothing to say
    assert check(job_of(tmp_path, node(HDR), node(HDR), node(HDR)), "IB004") == []


@fires("IB005")
def test_one_port_trained_at_a_lower_rate(tmp_path: Path) -> None:
    slow = {"mlx5_0/ports/1/rate": "100 Gb/sec (4X EDR)"}
    f = only(check(job_of(tmp_path, node(), (ROCE, {}, slow), node()), "IB005"))
    assert f.hosts == ["node002"] and f.severity == Severity.WARNING
    assert f.actual == "mlx5_0:1 100 Gb/sec (4X EDR)" and f.expected == "200 Gb/sec"


@fires("IB005")
def test_infiniband_node_among_roce_nodes(tmp_path: Path) -> None:
    f = only(check(job_of(tmp_path, node(), node(), node(HDR)), "IB005"))
    assert f.hosts == ["node003"] and f.severity == Severity.ERROR
    assert (f.expected, f.actual) == ("Ethernet", "InfiniBand")


def test_a_faster_port_is_not_a_slow_one(tmp_path: Path) -> None:
    fast = {"mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)"}
    assert check(job_of(tmp_path, node(), (ROCE, {}, fast), node()), "IB005") == []


def test_healthy_rdma_job_is_silent(tmp_path: Path) -> None:
    job = job_of(tmp_path, node(), node(), node(), gids=(POD,))
    assert [c for c in ("IB001", "IB002", "IB003", "IB004", "IB005", "IB006") if check(job, c)] == []


@fires("IB006")
def test_fixed_gid_index_names_an_empty_slot_in_pods(tmp_path: Path) -> None:
    env = {"NCCL_IB_GID_INDEX": "3"}
    f = only(check(job_of(tmp_path, node(env=env), node(env=env), gids=(POD,)), "IB006"))
    assert f.severity == Severity.ERROR and f.hosts == ["node001", "node002"]
    assert f.message == "NCCL_IB_GID_INDEX=3 names no GID on mlx5_0:1 (net1),mlx5_1:1 (net2)"


@fires("IB006")
def test_roce_port_with_only_link_local_gids(tmp_path: Path) -> None:
    no_v4 = {f"mlx5_1/ports/1/gids/{g}": "0000:0000:0000:0000:0000:0000:0000:0000" for g in (6, 7)}
    f = only(check(job_of(tmp_path, node(), (ROCE, {}, no_v4), gids=(POD,)), "IB006"))
    assert f.severity == Severity.WARNING and f.hosts == ["node002"]
    assert "mlx5_1:1 (net2)" in f.message and "mlx5_0" not in f.message


def test_gid_index_that_exists_is_silent(tmp_path: Path) -> None:
    env = {"NCCL_IB_GID_INDEX": "7"}
    assert check(job_of(tmp_path, node(env=env), node(env=env), gids=(POD,)), "IB006") == []


def test_down_ports_do_not_matter_where_ib_is_disabled(tmp_path: Path) -> None:
    env = {"NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    assert check(job_of(tmp_path, node(HDR, env), node(HDR, env)), "IB004") == []
