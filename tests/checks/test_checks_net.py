"""NET: from factory facts whose network part is parsed from real captures of namespace hosts
(tests/fixtures/network/*, made by capture.sh): eth-docker (eth0 + idle docker0), ens5-down
(ens5, running docker0, eth1 admin down), docker-only, ib-virbr (ib0, eth0, virbr0), lo-only."""

from __future__ import annotations

from tests.factories import captured_network, check, cpu_job, fires, master, node_job, only, tweak
from validator.model import Facts, Severity

NCCL_OLD, NCCL_NEW = "2.21.5", "2.28.3"  # before / since NCCL checks IFF_RUNNING


def on_hosts(
    hosts: list[str],
    env: dict[str, str] | None = None,
    nccl: str = NCCL_OLD,
    gpus: int = 8,
    addrs: dict[str, str] | None = None,
) -> list[Facts]:
    """One wrapper agent per captured host; ``addrs``: what each hostname resolves to (Gloo)."""
    job = node_job(len(hosts), gpus=gpus) if gpus else cpu_job(len(hosts), 1)
    out = []
    for n, (f, host) in enumerate(zip(job, hosts, strict=True)):
        net = captured_network(host, env, nccl, [addrs[host]] if addrs and host in addrs else [])
        net["master"] = master(local=n == 0)
        sw = {"nccl": nccl if gpus else None}
        out.append(tweak([f], 0, host=host, hostname=host, network=net, env=env or {}, software=sw)[0])
    return out


@fires("NET001")
def test_ifname_prefix_that_only_matches_a_down_link_on_nccl_2_28() -> None:
    job = on_hosts(["eth-docker", "ens5-down", "eth-docker"], {"NCCL_SOCKET_IFNAME": "eth"}, NCCL_NEW)
    f = only(check(job, "NET001"))
    assert f.hosts == ["ens5-down"]
    assert "Bootstrap : no socket interface found" in f.message


def test_ifname_prefix_present_everywhere() -> None:
    assert check(on_hosts(["eth-docker", "ib-virbr"], {"NCCL_SOCKET_IFNAME": "eth"}, NCCL_NEW), "NET001") == []


def test_cpu_job_ignores_nccl_settings_it_does_not_use() -> None:
    job = on_hosts(["eth-docker", "lo-only"], gpus=0, addrs={"eth-docker": "10.66.0.11"})
    assert check(job, "NET001") == []


@fires("NET002")
def test_gloo_ifname_missing_on_one_host() -> None:
    job = on_hosts(["eth-docker", "ens5-down"], {"GLOO_SOCKET_IFNAME": "eth0"}, gpus=0)
    f = only(check(job, "NET002"))
    assert f.hosts == ["ens5-down"]
    assert f.severity == Severity.ERROR
    assert "Unable to find address for: eth0" in f.message


def test_gloo_ifname_in_a_gpu_job_is_a_warning() -> None:
    job = on_hosts(["eth-docker", "ens5-down"], {"GLOO_SOCKET_IFNAME": "eth0"})
    assert only(check(job, "NET002")).severity == Severity.WARNING


@fires("NET003")
def test_nccl_falls_back_to_lo_on_a_host_with_nothing_else() -> None:
    f = only(check(on_hosts(["eth-docker", "lo-only"]), "NET003"))
    assert f.hosts == ["lo-only"]
    assert "lo (nothing else found)" in f.message


@fires("NET003")
def test_gloo_binds_loopback_when_the_hostname_maps_to_127() -> None:
    addrs = {"eth-docker": "127.0.1.1", "ib-virbr": "10.66.0.13"}  # /etc/hosts: 127.0.1.1 eth-docker
    f = only(check(on_hosts(["eth-docker", "ib-virbr"], gpus=0, addrs=addrs), "NET003"))
    assert f.hosts == ["eth-docker"]
    assert f.message.startswith("Gloo")


def test_loopback_is_fine_on_a_single_host() -> None:
    assert check(on_hosts(["lo-only"]), "NET003") == []


@fires("NET004")
def test_docker_bridge_as_the_only_choice_is_an_error_across_hosts() -> None:
    f = only(check(on_hosts(["eth-docker", "docker-only"]), "NET004"))
    assert f.hosts == ["docker-only"]
    assert f.severity == Severity.ERROR
    assert f.actual == "docker0"


def test_pod_eth0_is_a_veth_and_not_virtual() -> None:
    # every captured eth0/ens5 here is a veth, as in a Kubernetes pod
    assert check(on_hosts(["eth-docker", "ens5-down", "v6-first"]), "NET004") == []


@fires("NET005")
def test_named_interface_that_is_down_with_old_nccl() -> None:
    job = on_hosts(["eth-docker", "ens5-down"], {"NCCL_SOCKET_IFNAME": "=eth1,eth0"}, NCCL_OLD)
    f = only(check(job, "NET005"))
    assert f.hosts == ["ens5-down"]
    assert "eth1" in f.message


def test_nccl_2_28_skips_the_down_interface_itself() -> None:
    job = on_hosts(["eth-docker", "ens5-down"], {"NCCL_SOCKET_IFNAME": "^lo,docker"}, NCCL_NEW)
    assert check(job, "NET005") == []


@fires("NET006")
def test_ipoib_wins_by_default_and_lands_on_another_subnet() -> None:
    job = on_hosts(["eth-docker", "ens5-down", "ib-virbr"])
    f = only(check(job, "NET006"))
    assert f.hosts == ["ib-virbr"]
    assert (f.expected, f.actual) == ("10.66.0.0/24", "10.88.0.0/24")


@fires("NET006")
def test_gloo_subnets_compare_by_the_interface_prefix() -> None:
    addrs = {"eth-docker": "10.66.0.11", "v6-first": "10.66.0.15", "ib-virbr": "10.88.0.13"}
    f = only(check(on_hosts(["eth-docker", "v6-first", "ib-virbr"], gpus=0, addrs=addrs), "NET006"))
    assert f.hosts == ["ib-virbr"]


def test_pinning_the_interface_puts_every_node_on_one_subnet() -> None:
    job = on_hosts(["eth-docker", "ens5-down", "ib-virbr"], {"NCCL_SOCKET_IFNAME": "eth0,ens5"})
    assert check(job, "NET006") == []


@fires("NET007")
def test_one_node_names_its_nic_differently() -> None:
    f = only(check(on_hosts(["eth-docker", "ens5-down", "eth-docker"]), "NET007"))
    assert f.severity == Severity.INFO
    assert f.hosts == ["ens5-down"] and f.actual == "ens5"


@fires("NET008")
def test_mtu_outlier() -> None:
    job = on_hosts(["eth-docker", "ens5-down", "ib-virbr"], {"NCCL_SOCKET_IFNAME": "eth0,ens5"})
    ifaces = [dict(i, mtu=9000) if i["name"] == "eth0" else i for i in job[2]["network"]["interfaces"]]
    job = tweak(job, 2, network={"interfaces": ifaces})
    f = only(check(job, "NET008"))
    assert f.hosts == ["ib-virbr"]
    assert (f.expected, f.actual) == ("1500", "9000")


def test_same_mtu_everywhere() -> None:
    assert check(on_hosts(["eth-docker", "ens5-down"]), "NET008") == []
