"""The agent's sysfs collector on trees built from public ibstat/ibstatus/show_gids outputs
(tests/fixtures/ib), and the parser's reading of NCCL's rules (validator/facts/ib.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ibtree import build, ib_facts, raw
from validator.agent.probe import IB_MAX, ib_sysfs
from validator.facts import load_facts
from validator.facts.ib import hca_matches, parse_hca_list, parse_ib, strtoll

HDR, ROCE, MLX4 = "ibstat-ib-hdr.txt", "ibstat-roce-200.txt", "ibstat-mlx4-two-ports.txt"
EDR, POD, BOND = "ibstatus-roce-edr.txt", "show_gids-pod-macvlan.txt", "show_gids-bond-vxlan.txt"
DEVINFO_DOWN, DEVINFO_POD = "ibv_devinfo-ib-down.txt", "ibv_devinfo-roce-pod.txt"


def used(tmp_path: Path, *fixtures: str, **env: str) -> list[str]:
    return ib_facts(tmp_path, *fixtures, env=env)["used"]


def test_ibstat_infiniband_tree_reads_as_ibstat_printed_it(tmp_path: Path) -> None:
    ib = ib_facts(tmp_path, HDR)
    ports = {p["name"]: p for d in ib["devices"] for p in d["ports"]}
    assert (ports["mlx5_0:1"]["state"], ports["mlx5_0:1"]["phys_state"]) == ("ACTIVE", "LinkUp")
    assert (ports["mlx5_1:1"]["state"], ports["mlx5_1:1"]["phys_state"]) == ("DOWN", "Disabled")
    assert ports["mlx5_0:1"]["rate_gbps"] == 200.0 and ports["mlx5_0:1"]["link_layer"] == "InfiniBand"
    assert ports["mlx5_0:1"]["roce_v2"] is None  # InfiniBand: no RoCE GIDs to ask about
    assert ib["devices"][0]["node_guid"] == "1070:fd03:008e:b580" and ib["devices"][0]["fw_ver"] == "20.33.1048"
    assert (ib["transport"], ib["used"], ib["rule"]) == ("IB", ["mlx5_0:1"], "default: every active port")


def test_ibstatus_rate_keeps_the_width_sysfs_prints(tmp_path: Path) -> None:
    ib = ib_facts(tmp_path, EDR)
    port = ib["devices"][0]["ports"][0]
    assert (port["rate"], port["rate_gbps"], port["link_layer"]) == ("100 Gb/sec (4X EDR)", 100.0, "Ethernet")
    assert port["roce_v2"] is False  # only the link-local default GID: NCCL finds no RoCE v2 address
    assert ib["used"] == ["mlx5_0:1", "mlx5_1:1"]


def test_pod_gid_table_from_index_4_names_the_netdev_and_roce_v2(tmp_path: Path) -> None:
    ib = ib_facts(tmp_path, ROCE, POD, env={"NCCL_IB_GID_INDEX": "7"})
    ports = [p for d in ib["devices"] for p in d["ports"]]
    assert [(p["netdev"], p["roce_v2"], p["gid_ok"]) for p in ports] == [("net1", True, True), ("net2", True, True)]


def gid_ok(
    tmp_path: Path, *fixtures: str, change: dict[str, str | None] | None = None, **env: str
) -> list[bool | None]:
    ib = ib_facts(tmp_path, *fixtures, env=env, change=change)
    return [p["gid_ok"] for d in ib["devices"] for p in d["ports"]]


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, [True, True]),  # NCCL's own choice: index 7, RoCE v2, IPv4-mapped
        ({"NCCL_IB_GID_INDEX": "3"}, [False, False]),  # the usual bare-metal index: empty in this pod
        ({"NCCL_IB_GID_INDEX": "200"}, [None, None]),  # beyond the slots the agent reads: unknown
        ({"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, [False, False]),  # only link-local IPv6 GIDs here
        ({"NCCL_IB_ROCE_VERSION_NUM": "1"}, [True, True]),
    ],
)
def test_gid_nccl_would_take_in_a_pod(tmp_path: Path, env: dict[str, str], want: list[bool | None]) -> None:
    assert gid_ok(tmp_path, ROCE, POD, **env) == want


def test_only_a_link_local_gid_is_no_usable_gid(tmp_path: Path) -> None:
    assert gid_ok(tmp_path, EDR) == [False, False]
    assert gid_ok(tmp_path / "hdr", HDR) == [None, None]  # InfiniBand: GID 0, nothing to choose


def test_bond_gids_keep_the_first_netdev_and_every_populated_slot(tmp_path: Path) -> None:
    port = raw(tmp_path, BOND)["devices"][0]["ports"][0]
    assert [g[0] for g in port["gids"]] == [0, 1, 2, 3, 4, 5]
    assert port["gids"][3][2:] == ["RoCE v2", "b3.vxlan.30100"]
    facts = parse_ib(raw(tmp_path / "b", BOND, change={"mlx5_bond_0/ports/1/link_layer": "Ethernet"}), {})
    assert facts is not None and facts["devices"][0]["ports"][0]["netdev"] == "bond1"


def test_missing_link_layer_file_is_unknown_and_not_used(tmp_path: Path) -> None:
    ib = ib_facts(tmp_path, MLX4)
    assert [(p["port"], p["link_layer"], p["used"]) for p in ib["devices"][0]["ports"]] == [
        (1, "InfiniBand", False),
        (2, None, False),  # NCCL takes only InfiniBand or Ethernet link layers
    ]
    assert (ib["transport"], ib["rule"]) == ("Socket", "no active RDMA port")


@pytest.mark.parametrize(
    ("hca", "want"),
    [
        ("mlx5_0", ["mlx5_0:1"]),
        ("=mlx5_1", ["mlx5_1:1"]),
        ("^mlx5_0", ["mlx5_1:1"]),
        ("^=mlx5_1", ["mlx5_0:1"]),
        ("mlx5_0:1,mlx5_1:2", ["mlx5_0:1"]),  # port 2 does not exist on mlx5_1
        ("mlx5", ["mlx5_0:1", "mlx5_1:1"]),
        ("", ["mlx5_0:1", "mlx5_1:1"]),  # set but empty: an empty list matches everything
        ("^", []),  # excludes with an empty list: matches everything, so excludes everything
        ("=mlx5", []),
        ("mlx5_0:x", []),  # atoi("x") is port 0
    ],
)
def test_nccl_ib_hca_matching(tmp_path: Path, hca: str, want: list[str]) -> None:
    assert used(tmp_path, ROCE, NCCL_IB_HCA=hca) == want


def test_prefix_mlx5_1_also_takes_mlx5_10() -> None:
    exclude, exact, entries = parse_hca_list("mlx5_1:1")
    assert (exclude, exact, entries) == (False, False, [("mlx5_1", 1)])
    assert hca_matches("mlx5_10", 1, entries, exact) and not hca_matches("mlx5_10", 1, entries, True)


@pytest.mark.parametrize(
    ("value", "want"), [("1", 1), ("0", 0), ("", None), (None, None), ("true", 0), ("0x10", 16), (" 2x", 2), ("010", 8)]
)
def test_integer_variables_read_like_strtoll(value: str | None, want: int | None) -> None:
    assert strtoll(value) == want


@pytest.mark.parametrize(
    ("env", "transport", "rule"),
    [
        ({"NCCL_IB_DISABLE": "1"}, "Socket", "NCCL_IB_DISABLE=1"),
        ({"NCCL_IB_DISABLE": "true"}, "IB", "default: every active port"),  # strtoll("true") is 0
        ({"NCCL_NET": "Socket"}, "Socket", "NCCL_NET=Socket"),
        ({"NCCL_NET": "ib"}, "IB", "default: every active port"),
        ({"NCCL_NET": "AWS Libfabric"}, "AWS Libfabric", "NCCL_NET=AWS Libfabric (an external net plugin)"),
        ({"NCCL_IB_HCA": "mlx5_9"}, "Socket", "NCCL_IB_HCA=mlx5_9 matches no active port"),
    ],
)
def test_which_net_nccl_would_use(tmp_path: Path, env: dict[str, str], transport: str, rule: str) -> None:
    ib = ib_facts(tmp_path, HDR, env=env)
    assert (ib["transport"], ib["rule"], ib["error"]) == (transport, rule, None)
    assert (ib["used"] != []) == (transport == "IB")


def test_nccl_net_ib_without_a_usable_port_is_nccls_own_failure(tmp_path: Path) -> None:
    ib = ib_facts(tmp_path, HDR, env={"NCCL_NET": "IB", "NCCL_IB_HCA": "=mlx5_1"})
    assert ib["transport"] == "none"
    assert ib["error"] is not None and "Failed to initialize any NET plugin" in ib["error"]


def test_no_infiniband_class_is_no_device_not_an_error(tmp_path: Path) -> None:
    reading = ib_sysfs(str(tmp_path / "absent"))
    assert reading == {"devices": [], "errors": {}}
    assert ib_facts(tmp_path, env={})["rule"] == "no RDMA device"


def test_unreadable_files_are_recorded_and_the_rest_is_read(tmp_path: Path) -> None:
    top = build(tmp_path, HDR)
    (top / "mlx5_0/ports/1/rate").unlink()
    (top / "mlx5_0/ports/1/rate").mkdir()  # reading it fails with IsADirectoryError, as root too
    reading = ib_sysfs(str(top))
    assert reading["errors"] == {"mlx5_0/ports/1/rate": "Is a directory"}
    assert reading["devices"][1]["ports"][0]["state"] == "1: DOWN"


def test_collector_is_bounded_in_devices_and_files(tmp_path: Path) -> None:
    top = tmp_path / "ib"
    for d in range(IB_MAX["devices"] + 5):
        for p in range(1, 3):
            os.makedirs(top / f"mlx5_{d}" / "ports" / str(p) / "gids")
            (top / f"mlx5_{d}" / "ports" / str(p) / "state").write_text("4: ACTIVE\n")
    reading = ib_sysfs(str(top))
    names = [d["name"] for d in reading["devices"]]
    assert len(names) == IB_MAX["devices"] and names[:3] == ["mlx5_0", "mlx5_1", "mlx5_2"]  # natural order
    assert ib_sysfs(str(top), budget_s=0.0)["errors"]["limit"].startswith("stopped after 0 files")


def test_agent_document_with_ib_reaches_facts_and_errors(tmp_path: Path) -> None:
    reading = raw(tmp_path, HDR)
    reading["errors"] = {"mlx5_0/fw_ver": "Permission denied"}
    doc = {"kind": "raw", "agent_schema": 1, "hostname": "n1", "env": {}, "ib": reading}
    facts = load_facts(doc, "n1.json")
    assert facts["ib"] is not None and facts["ib"]["used"] == ["mlx5_0:1"]
    assert facts["errors"]["ib:mlx5_0/fw_ver"] == "Permission denied"


def test_facts_of_an_older_validator_without_ib_load_with_ib_null() -> None:
    from tests.factories import facts

    doc = dict(facts("node001"))
    doc.pop("ib")
    assert load_facts(doc, "old.json")["ib"] is None


def test_ibv_devinfo_port_down_is_no_active_port(tmp_path: Path) -> None:
    ib = ib_facts(tmp_path, DEVINFO_DOWN)
    port = ib["devices"][0]["ports"][0]
    assert (port["state"], port["link_layer"], port["used"]) == ("DOWN", "InfiniBand", False)
    assert ib["devices"][0]["node_guid"] == "58a2:e103:002a:09b8"
    assert (ib["transport"], ib["rule"]) == ("Socket", "no active RDMA port")


def test_ibv_devinfo_roce_port_in_a_pod(tmp_path: Path) -> None:
    port = ib_facts(tmp_path, DEVINFO_POD)["devices"][0]["ports"][0]
    assert (port["state"], port["phys_state"], port["rate_gbps"], port["used"]) == ("ACTIVE", "LinkUp", 25.0, True)
    assert gid_ok(tmp_path / "a", DEVINFO_POD, NCCL_IB_GID_INDEX="15") == [True]
    assert gid_ok(tmp_path / "b", DEVINFO_POD, NCCL_IB_GID_INDEX="3") == [False]  # the usual index, empty here


def test_gid_scan_stops_after_a_run_of_empty_slots(tmp_path: Path) -> None:
    far = {"mlx5_0/ports/1/gids/40": "0000:0000:0000:0000:0000:ffff:0a98:000c"}
    far |= {f"mlx5_0/ports/1/gids/{g}": "0000:0000:0000:0000:0000:0000:0000:0000" for g in range(40)}
    port = raw(tmp_path, ROCE, change=far)["devices"][0]["ports"][0]
    assert (port["gids"], port["gid_slots"]) == ([], IB_MAX["gap"])
    assert gid_ok(tmp_path / "a", ROCE, change=far, NCCL_IB_GID_INDEX="40")[0] is None  # not read: unknown
    assert gid_ok(tmp_path / "b", ROCE, change=far, NCCL_IB_GID_INDEX="3")[0] is False
    assert gid_ok(tmp_path / "c", ROCE, change=far)[0] is None  # nothing found: unknown, not "no GID"


def test_published_json_schema_takes_ib_and_documents_without_it(tmp_path: Path) -> None:
    import json

    import jsonschema

    from tests.factories import facts
    from validator import schema

    published = json.loads((Path(schema.__file__).parent.parent / "docs/schema/facts-v1.schema.json").read_text())
    check = jsonschema.Draft202012Validator(published)
    doc = dict(facts("node001", ib=ib_facts(tmp_path, ROCE, POD, env={"NCCL_IB_HCA": "=mlx5_1"})))
    assert list(check.iter_errors(doc)) == []
    doc.pop("ib")  # a document of an older validator
    assert list(check.iter_errors(doc)) == []
    doc["ib"] = {"transport": "IB"}  # but a section that is there is checked
    assert list(check.iter_errors(doc)) != []
