"""Software versions, system limits, the facts schema, and whole agent documents captured in
network-namespace hosts (tests/fixtures/network/*/probe-raw.json) parsed end to end."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from validator.checks import run_checks
from validator.errors import UserError
from validator.facts import load_facts, parse
from validator.facts.node import nccl_version, parse_software, parse_system, torch_cuda
from validator.facts.schema import SchemaError, validate_facts
from validator.profiles import Profile

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def raw(host: str) -> dict[str, Any]:
    return json.loads((FIX / "network" / host / "probe-raw.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "cuda"),
    [
        ("torch-2.13.0+cpu-version.py.txt", None),
        ("torch-cu124-version.py.txt", "12.4"),
        ("torch-1.13-cu117-version.py.txt", "11.7"),
    ],
)
def test_torch_cuda_from_version_py(name: str, cuda: str | None) -> None:
    assert torch_cuda((FIX / "software" / name).read_text()) == cuda


@pytest.mark.parametrize(
    ("code", "version"),
    [(22105, "2.21.5"), (22803, "2.28.3"), (23007, "2.30.7"), (2804, "2.8.4"), (0, None), (None, None)],
)
def test_nccl_version_code(code: int | None, version: str | None) -> None:
    assert nccl_version(code) == version


def test_software_from_the_library_or_the_wheel() -> None:
    version_py = (FIX / "software" / "torch-cu124-version.py.txt").read_text()
    pkgs = {"torch": "2.5.1+cu124", "torch_version_py": version_py, "nvidia-nccl-cu12": "2.21.5", "deepspeed": "0.15.4"}
    sw = parse_software({"python": "3.11.7", "packages": pkgs, "nccl": {"path": None, "code": None}})
    assert sw == {
        "python": "3.11.7", "torch": "2.5.1+cu124", "torch_cuda": "12.4", "nccl": "2.21.5",
        "nccl_path": "nvidia-nccl wheel 2.21.5", "deepspeed": "0.15.4", "transformers": None,
    }  # fmt: skip
    loaded = parse_software(
        {"python": "3.11.7", "packages": pkgs, "nccl": {"path": "/usr/lib/libnccl.so.2", "code": 22306}}
    )
    assert (loaded["nccl"], loaded["nccl_path"]) == ("2.23.6", "/usr/lib/libnccl.so.2")  # what loads wins


def test_system_limits() -> None:
    r = raw("ens5-down")
    s = parse_system(r)
    assert s["somaxconn"] == int(r["sysctl"]["somaxconn"])
    assert (s["memlock_soft"], s["nofile_soft"]) == tuple(r["limits"][k][0] for k in ("memlock", "nofile"))
    assert s["shm_bytes"] == r["limits"]["shm_bytes"] > 0
    empty = parse_system({})
    assert (empty["shm_bytes"], empty["somaxconn"], empty["ib_devices"]) == (None, None, [])


# ---------------------------------------------------------------- whole documents


def test_namespace_hosts_parse_end_to_end() -> None:
    r0, r1 = parse(raw("eth-docker")), parse(raw("ens5-down"))
    assert (r0["host"], r1["host"]) == ("eth-docker", "ens5-down")
    assert (r0["launch"]["rank"], r1["launch"]["rank"], r1["launch"]["master_addr"]) == (0, 1, "10.66.0.11")
    assert r0["network"]["nccl"]["ifaces"] == ["eth0"] and r1["network"]["nccl"]["ifaces"] == ["ens5"]
    assert r0["network"]["nccl"]["rule"] == "NCCL_SOCKET_IFNAME=^docker,lo"
    m0, m1 = r0["network"]["master"], r1["network"]["master"]
    assert m0 is not None and m1 is not None
    assert (m0["local"], m0["loopback"], m1["local"], m1["route_dev"]) == (True, False, False, "ens5")
    assert r1["network"]["gloo"]["rule"].endswith("does not resolve: loopback fallback")  # own UTS hostname
    assert r0["gpus"]["source"] == "none" and r0["errors"] == {}
    # NCCL_SOCKET_IFNAME alone does not make a GPU job: a CPU job's Gloo falls back to loopback
    findings = [f for f in run_checks([r0, r1]) if f.code.startswith(("RNK", "RDZ", "NET"))]
    assert [(f.code, f.hosts, f.actual) for f in findings] == [
        ("NET003", [h], "lo") for h in ("eth-docker", "ens5-down")
    ]
    gpu = Profile("p.yaml", name="p", gpus_per_node=8)  # a GPU job: NCCL's interfaces are fine
    findings = [f for f in run_checks([r0, r1], gpu) if f.code.startswith(("RNK", "RDZ", "NET"))]
    assert [(f.code, f.hosts, f.actual) for f in findings] == [("NET007", ["ens5-down"], "ens5")]  # info only


def test_raw_document_from_a_newer_agent_names_the_input() -> None:
    doc = dict(raw("eth-docker"), agent_schema=99)
    with pytest.raises(UserError) as e:
        load_facts(doc, "rank0.json")
    assert str(e.value).startswith("rank0.json: agent output schema 99")


def test_broken_raw_document_is_a_user_error() -> None:
    doc = dict(raw("eth-docker"), interfaces={"ip_addr": [{"ifname": "eth0", "addr_info": [{"family": "inet"}]}]})
    doc["interfaces"]["ip_addr"][0]["addr_info"][0]["local"] = None
    doc["gpus"] = {"source": "nvml", "data": {"devices": [{"uuid": "x"}]}}  # no index: KeyError inside
    with pytest.raises(UserError) as e:
        load_facts(doc, "r.json")
    assert "r.json" in str(e.value) and "could not be parsed" in str(e.value)


# ---------------------------------------------------------------- schema


def good() -> dict[str, Any]:
    return copy.deepcopy(dict(parse(raw("eth-docker"))))


def test_parsed_documents_validate() -> None:
    assert validate_facts(good(), "f.json")["host"] == "eth-docker"


def test_wrong_field_type_names_file_host_and_field() -> None:
    doc = good()
    doc["launch"]["rank"] = "0"
    with pytest.raises(SchemaError) as e:
        validate_facts(doc, "rank0.json")
    assert str(e.value) == "rank0.json: host eth-docker: launch.rank: expected an integer, got str '0'"


def test_missing_nested_field_and_bad_list_item() -> None:
    doc = good()
    del doc["network"]["nccl"]["rule"]
    with pytest.raises(SchemaError, match=r"network\.nccl\.rule: missing field"):
        validate_facts(doc)
    doc = good()
    doc["network"]["interfaces"][1]["up"] = "yes"
    with pytest.raises(SchemaError, match=r"network\.interfaces\[1\]\.up: expected true or false"):
        validate_facts(doc)


def _paths(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every value's path in ``doc`` (containers included)."""
    out = [path]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out += _paths(v, (*path, k))
    return out


def test_the_compiled_schema_check_agrees_with_the_validators_on_every_field() -> None:
    """The coordinator's fast check (generated from the same type hints) accepts exactly what the
    field-by-field validators accept: each field, in turn, of the wrong type, null, or missing."""
    from validator.facts.schema import _facts_validator, matches

    base = json.loads(json.dumps(good()))
    base["gpus"]["devices"] = [{"index": 0, "uuid": "GPU-1", "name": "H100", "pci_bus_id": "0000:18:00.0",
                                "memory_mib": None, "mig_uuids": ["MIG-1"]}]  # fmt: skip
    base["launch"]["command"] = {"tool": "torchrun", "argv": ["torchrun"], "options": {"a": "b"}, "script": None,
                                 "errors": []}  # fmt: skip
    assert matches(base)
    tried = 0
    for path in _paths(base)[1:]:
        for bad in ("wrong", 7, None, [1], {"k": 1}, True, 2.5, "missing"):
            doc = copy.deepcopy(base)
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            if bad == "missing" and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = bad
            try:
                _facts_validator()(copy.deepcopy(doc))
                valid = True
            except SchemaError:
                valid = False
            if path in (("ib",), ("launch", "layout"), ("gpus", "health")) and bad == "missing":
                valid = False  # the validators fill in a missing ib, layout or health (older documents); the fast check defers
            assert matches(doc) == valid, (path, bad)
            tried += 1
    assert tried > 500


def test_newer_schema_and_not_an_object() -> None:
    doc = good()
    doc["schema"] = 2
    with pytest.raises(SchemaError, match="facts schema 2 is newer"):
        validate_facts(doc, "x.json")
    with pytest.raises(SchemaError, match="expected a facts object, got list"):
        validate_facts([], "x.json")
    doc = good()
    doc["launch"]["master_port"] = True  # bool is not an int in JSON terms
    with pytest.raises(SchemaError, match=r"launch\.master_port"):
        validate_facts(doc)
