"""RDZ: the rendezvous endpoint, from factory facts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import check, facts, fires, master, node_job, only, rank_job, tweak
from validator.model import Facts, Severity


def on_node(job: list[Facts], host: str, **over: Any) -> list[Facts]:
    for i, f in enumerate(job):
        if f["host"] == host:
            job = tweak(job, i, **over)
    return job


@fires("RDZ001")
def test_master_addr_outlier_names_its_ranks() -> None:
    job = on_node(
        rank_job(3, 2),
        "node003",
        launch={"master_addr": "node009"},
        network={"master": master("node009", ["10.0.0.9"])},
    )
    f = only(check(job, "RDZ001"))
    assert f.ranks == [4, 5]
    assert f.hosts == ["node003"]
    assert (f.expected, f.actual) == ("10.0.0.1", "node009")


def test_a_name_and_its_address_are_the_same_master() -> None:
    job = on_node(rank_job(2, 2), "node002", launch={"master_addr": "10.0.0.1"}, network={"master": master("10.0.0.1")})
    assert check(job, "RDZ001") == []


def test_an_unresolvable_name_is_left_to_rdz005() -> None:
    job = on_node(rank_job(2, 2), "node002", network={"master": master("node001", [], error="timed out")})
    assert check(job, "RDZ001") == []
    assert check(job, "RDZ005")


@fires("RDZ002")
def test_master_port_outlier() -> None:
    job = tweak(rank_job(2, 2), 3, launch={"master_port": 29501})
    f = only(check(job, "RDZ002"))
    assert f.ranks == [3]
    assert (f.expected, f.actual) == ("29500", "29501")


def test_same_port_everywhere() -> None:
    assert check(rank_job(2, 2), "RDZ002") == []


@fires("RDZ003")
def test_split_dns_names_the_node_that_resolves_elsewhere() -> None:
    job = on_node(rank_job(3, 2), "node002", network={"master": master("node001", ["10.9.9.9"])})
    f = only(check(job, "RDZ003"))
    assert f.hosts == ["node002"]
    assert (f.expected, f.actual) == ("10.0.0.1", "10.9.9.9")


@fires("RDZ004")
def test_loopback_master_on_one_node_of_a_multi_node_job() -> None:
    # the classic: /etc/hosts maps the master's own hostname to 127.0.1.1
    job = on_node(rank_job(2, 2), "node001", network={"master": master("node001", ["127.0.1.1"], local=True)})
    f = only(check(job, "RDZ004"))
    assert f.ranks == [0, 1]
    assert f.hosts == ["node001"]
    assert "127.0.1.1" in f.message
    assert check(job, "RDZ001") == [] and check(job, "RDZ003") == []  # one finding, not three


@fires("RDZ004")
def test_c10d_localhost_on_several_hosts() -> None:
    # c10d hands workers MASTER_ADDR=socket.getfqdn(), which can be "localhost" (reference §1.1)
    job = [
        tweak([f], 0, launch={"master_addr": "localhost"}, network={"master": master("localhost", ["127.0.0.1"])})[0]
        for f in rank_job(2, 2)
    ]
    assert only(check(job, "RDZ004")).ranks == [0, 1, 2, 3]


def test_c10d_workers_on_one_host_may_use_localhost() -> None:
    job = [
        tweak(
            [f], 0, launch={"master_addr": "localhost"}, network={"master": master("localhost", ["127.0.0.1", "::1"])}
        )[0]
        for f in rank_job(1, 4)
    ]
    assert check(job, "RDZ004") == []


@fires("RDZ005")
def test_unresolvable_master_names_the_hosts() -> None:
    job = on_node(
        rank_job(2, 2),
        "node002",
        network={"master": master("node001", [], error="[Errno -2] Name or service not known")},
    )
    f = only(check(job, "RDZ005"))
    assert f.hosts == ["node002"]
    assert "Name or service not known" in f.message


def test_resolvable_master() -> None:
    assert check(rank_job(2, 2), "RDZ005") == []


@fires("RDZ006")
def test_busy_port_on_the_master_names_the_owner() -> None:
    owner = "pid 4242 (python train.py)"
    job = tweak(node_job(2), 0, network={"master": master(local=True, port_free=False, owner=owner)})
    f = only(check(job, "RDZ006"))
    assert f.hosts == ["node001"]
    assert owner in f.message and "29500" in f.verify


def test_torchrun_workers_find_the_port_held_by_their_own_agent() -> None:
    job = rank_job(1, 2, env={"TORCHELASTIC_USE_AGENT_STORE": "True"})
    job = tweak(job, 0, network={"master": master(local=True, port_free=False, owner="pid 1 (torchrun)")})
    assert check(job, "RDZ006") == []


@fires("RDZ007")
def test_port_out_of_range_and_not_a_number() -> None:
    job = tweak(rank_job(1, 3), 1, launch={"master_port": 70000, "sources": {"master_port": "env:MASTER_PORT"}})
    job = tweak(job, 2, launch={"master_port": None, "invalid": {"env:MASTER_PORT": "$PORT"}})
    found = {f.actual: f.ranks for f in check(job, "RDZ007")}
    assert found == {"env:MASTER_PORT=70000": [1], "env:MASTER_PORT='$PORT'": [2]}


def test_port_zero_is_fine_for_torchrun_standalone_only() -> None:
    job = [tweak([f], 0, launch={"master_port": 0, "rdzv_backend": "c10d"})[0] for f in node_job(1)]
    assert check(job, "RDZ007") == []
    static = [tweak([f], 0, launch={"master_port": 0})[0] for f in node_job(2)]
    assert only(check(static, "RDZ007")).hosts == ["node001", "node002"]


@fires("RDZ008")
def test_plain_env_ranks_without_master_addr() -> None:
    job = [facts("node001", launch={"rank": r, "world_size": 2, "master_port": 29500}) for r in range(2)]
    f = only(check(job, "RDZ008"))
    assert f.severity == Severity.ERROR
    assert f.ranks == [0, 1] and "MASTER_ADDR" in f.message


def test_missing_master_addr_under_srun_is_only_a_warning() -> None:
    job = [facts("n1", launch={"launcher": "slurm", "rank": r, "world_size": 2}) for r in range(2)]
    assert only(check(job, "RDZ008")).severity == Severity.WARNING


def test_single_process_and_torchrun_need_no_master() -> None:
    assert check([facts(launch={"rank": 0, "world_size": 1})], "RDZ008") == []
    assert check([facts(launch={"launcher": "torchrun", "rank": 0, "world_size": 2})], "RDZ008") == []


@fires("RDZ010")
def test_node_ranks_swapped_names_both_nodes() -> None:
    job = node_job(2, 8)
    job = tweak(tweak(job, 0, launch={"node_rank": 1}), 1, launch={"node_rank": 0})
    f = only(check(job, "RDZ010"))
    assert sorted(f.hosts) == ["node001", "node002"]
    assert "node rank 0 runs on node002, but MASTER_ADDR node001 is an address of node001" in f.message
    assert f.fix == "start node rank 0 on node001, or set MASTER_ADDR to node002"


def test_master_on_rank_zero_or_unknown_is_silent() -> None:
    assert check(node_job(2, 8), "RDZ010") == []
    assert check(rank_job(2, 2), "RDZ010") == []
    nobody = tweak(tweak(node_job(2, 8), 0, network={"master": master(local=False)}), 1, network={"master": master()})
    assert check(nobody, "RDZ010") == [], "a master address no node holds (a VIP): nothing to say"


def test_rank_zero_elsewhere_in_per_rank_mode() -> None:
    job = on_node(rank_job(2, 2), "node001", network={"master": master(local=False)})
    job = on_node(job, "node002", network={"master": master(local=True)})
    f = only(check(job, "RDZ010"))
    assert "rank 0 runs on node001, but MASTER_ADDR node001 is an address of node002 (rank 2)" in f.message


@fires("RDZ011")
def test_a_backend_torch_does_not_register_is_a_warning() -> None:
    """torchrun looks the backend up case-sensitively: C10D stops every node at once (a plugin could register it)."""
    job = [tweak([f], 0, launch={"rdzv_backend": "C10D"})[0] for f in node_job(2, 8)]
    f = only(check(job, "RDZ011"))
    assert f.severity == Severity.WARNING and f.fix == "write --rdzv-backend=c10d" and "'C10D'" in f.message
    plugin = [tweak([f], 0, launch={"rdzv_backend": "my-store"})[0] for f in node_job(2, 8)]
    assert "install the package" in only(check(plugin, "RDZ011")).fix


def test_the_backends_torch_registers_pass() -> None:
    for backend in ("static", "c10d", "etcd", "etcd-v2", None):
        job = [tweak([f], 0, launch={"rdzv_backend": backend})[0] for f in node_job(2, 8)]
        assert check(job, "RDZ011") == []


def test_the_backends_are_those_torch_registers() -> None:
    pytest.importorskip("torch.distributed.elastic.rendezvous.registry")
    from torch.distributed.elastic.rendezvous import api, registry  # noqa: F401 - importing it registers them

    from validator.checks.rdzv import TORCH_BACKENDS

    assert set(api.rendezvous_handler_registry._registry) == set(TORCH_BACKENDS)
