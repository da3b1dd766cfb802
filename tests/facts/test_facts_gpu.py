"""GPU facts from NVML, nvidia-smi CSV (every documented --format variant) and /proc/driver/nvidia,
and the CUDA_VISIBLE_DEVICES mapping (indices, UUIDs, UUID prefixes, MIG, invalid entries)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from validator.agent.probe import SMI_FIELDS
from validator.facts.gpu import map_visible, normalise_bus_id, parse_gpus
from validator.facts.schema import validate_facts
from validator.model import GpuFacts

GPU = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
H100_UUID = "GPU-8a3f1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6"


def smi(name: str, env: dict[str, str] | None = None) -> GpuFacts:
    return parse_gpus(
        {"source": "nvidia-smi", "data": {"query": SMI_FIELDS, "csv": (GPU / name).read_text()}}, env or {}
    )


def proc(version: str) -> dict[str, Any]:
    d = GPU / "proc"
    gpus = {
        p.stem.removeprefix("information-").replace("_", ":"): p.read_text() for p in sorted(d.glob("information-*"))
    }
    return {"version": (d / version).read_text(), "gpus": gpus}


def nvml(env: dict[str, str] | None = None) -> GpuFacts:
    return parse_gpus({"source": "nvml", "data": json.loads((GPU / "nvml-a100-mig.json").read_text())}, env or {})


@pytest.mark.parametrize(
    "name", ["smi-h100x8.csv", "smi-h100x8-noheader.csv", "smi-h100x8-nounits.csv", "smi-h100x8-noheader-nounits.csv"]
)
def test_nvidia_smi_csv_with_and_without_header_and_units(name: str) -> None:
    g = smi(name)
    assert (g["source"], g["driver"], g["cuda"], len(g["devices"])) == ("nvidia-smi", "550.54.15", None, 8)
    d = g["devices"][3]
    assert d == {
        "index": 3, "uuid": H100_UUID + "3", "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:5d:00.0",
        "memory_mib": 81559, "mig_uuids": [],
    }  # fmt: skip
    assert g["visible"] is None and g["visible_error"] is None


def test_nvidia_smi_not_available_field() -> None:
    g = smi("smi-a100x2-na.csv")
    assert [d["memory_mib"] for d in g["devices"]] == [40960, None]
    assert g["driver"] == "535.104.05"


def test_nvml() -> None:
    g = nvml()
    assert (g["source"], g["driver"], g["cuda"]) == ("nvml", "535.104.05", "12.2")
    assert [d["memory_mib"] for d in g["devices"]] == [81920, 81920]
    assert g["devices"][0]["pci_bus_id"] == "0000:07:00.0"
    assert len(g["devices"][0]["mig_uuids"]) == 2


@pytest.mark.parametrize(
    ("version", "driver"), [("version-proprietary.txt", "535.104.05"), ("version-open.txt", "550.54.15")]
)
def test_proc_driver_nvidia(version: str, driver: str) -> None:
    g = parse_gpus({"source": "proc", "data": proc(version)}, {})
    assert (g["source"], g["driver"], len(g["devices"])) == ("proc", driver, 2)
    assert g["devices"][1] == {
        "index": 1, "uuid": H100_UUID + "1", "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:2a:00.0",
        "memory_mib": None, "mig_uuids": [],
    }  # fmt: skip


def test_no_gpu_stack_is_a_fact() -> None:
    assert parse_gpus(None, {}) == {
        "source": "none",
        "driver": None,
        "cuda": None,
        "devices": [],
        "visible": None,
        "visible_error": None,
        "health": None,
    }
    assert parse_gpus(None, {"CUDA_VISIBLE_DEVICES": "0"})["visible"] == []


@pytest.mark.parametrize(
    ("bus", "norm"),
    [
        ("00000000:18:00.0", "0000:18:00.0"),
        ("0000:2A:00.0", "0000:2a:00.0"),
        ("00000001:c1:00.1", "0001:c1:00.1"),
        ("junk", "junk"),
    ],
)
def test_normalise_bus_id(bus: str, norm: str) -> None:
    assert normalise_bus_id(bus) == norm


# ---------------------------------------------------------------- CUDA_VISIBLE_DEVICES


def visible(cvd: str) -> tuple[list[str] | None, str | None]:
    g = smi("smi-h100x8.csv", {"CUDA_VISIBLE_DEVICES": cvd})
    return g["visible"], g["visible_error"]


def test_indices_in_cuda_order() -> None:
    assert visible("2,1") == ([H100_UUID + "2", H100_UUID + "1"], None)


def test_full_uuids_and_unique_prefixes() -> None:
    assert visible(f"{H100_UUID}5, GPU-8a3f1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a67") == (
        [H100_UUID + "5", H100_UUID + "7"],
        None,
    )
    assert visible(H100_UUID + "0")[0] == [H100_UUID + "0"]


def test_ambiguous_prefix_stops_the_list() -> None:
    v, err = visible("0,GPU-8a3f")
    assert v == [H100_UUID + "0"] and err is not None and "GPU-8a3f is ambiguous" in err


def test_first_invalid_entry_ends_the_list() -> None:
    v, err = visible("1,8,2")
    assert v == [H100_UUID + "1"] and err is not None and "no GPU 8" in err
    v, err = visible("0,GPU-deadbeef,1")
    assert v == [H100_UUID + "0"] and err is not None and "matches no GPU" in err
    assert visible("0,,1")[1] is not None


def test_negative_index_hides_the_rest_on_purpose() -> None:
    assert visible("0,2,-1,1") == ([H100_UUID + "0", H100_UUID + "2"], None)  # CUDA docs' own example
    assert visible("-1") == ([], None)
    assert visible("") == ([], None)


def test_same_gpu_twice() -> None:
    v, err = visible("1," + H100_UUID + "1")
    assert v == [H100_UUID + "1"] * 2 and err is not None and "same GPU twice" in err


def test_mig_uuids() -> None:
    g = nvml({"CUDA_VISIBLE_DEVICES": "MIG-2f6b1d3a-7c8e-5a4b-9d0c-1e2f3a4b5c6d"})
    assert (g["visible"], g["visible_error"]) == (["MIG-2f6b1d3a-7c8e-5a4b-9d0c-1e2f3a4b5c6d"], None)
    g = nvml({"CUDA_VISIBLE_DEVICES": "MIG-9e8d"})  # unique prefix
    assert g["visible"] == ["MIG-9e8d7c6b-5a4f-5e3d-2c1b-0a9f8e7d6c5b"]


def test_mapping_on_a_node_without_gpus() -> None:
    assert map_visible([], "0") == (
        [],
        "CUDA_VISIBLE_DEVICES=0: no GPU 0 on this node (CUDA ignores it and everything after it)",
    )


# ---------------------------------------------------------------- real H200 captures


H200 = GPU / "h200"  # captured by the lead on a real H200 node; see its README.md
H200_UUID = "GPU-4c2a46b8-d994-7be1-2bd6-c7b4991ff3ca"


def h200(name: str) -> dict[str, Any]:
    from validator.facts import parse

    return dict(parse(json.loads((H200 / name).read_text())))


@pytest.mark.skipif(not (H200 / "raw-nvml.json").exists(), reason="no real H200 captures (tests/fixtures/gpu/h200/)")
def test_real_h200_captures() -> None:
    """NVML (the agent's ctypes reader) and both fallbacks agree on a real H200; the real
    CUDA_VISIBLE_DEVICES cases map as CUDA does."""
    views = {src: h200(f"raw-{src}.json")["gpus"] for src in ("nvml", "nvidia-smi", "proc")}
    for src, g in views.items():
        assert g["source"] == src
        assert [(d["index"], d["uuid"], d["name"], d["pci_bus_id"]) for d in g["devices"]] == [
            (0, H200_UUID, "NVIDIA H200", "0000:00:06.0")
        ], src
        assert g["driver"] == "580.159.04", src
    assert views["nvml"]["cuda"] == "13.0"  # only NVML knows the driver's CUDA version
    assert views["nvml"]["devices"][0]["memory_mib"] == views["nvidia-smi"]["devices"][0]["memory_mib"] == 143771
    for name in ("nvidia-smi-query.csv", "nvidia-smi-query-noheader.csv"):
        assert smi(f"h200/{name}")["devices"] == views["nvidia-smi"]["devices"], name

    version, _, rest = (H200 / "proc-driver-nvidia.txt").read_text().partition("== /proc/driver/nvidia/gpus/")
    bus, _, info = rest.partition("/information\n")
    proc_text = parse_gpus({"source": "proc", "data": {"version": version, "gpus": {bus: info}}}, {})
    assert proc_text["devices"] == views["proc"]["devices"] and proc_text["driver"] == "580.159.04"

    prefix = h200("raw-cvd-uuid-prefix.json")["gpus"]  # CUDA_VISIBLE_DEVICES=GPU-4c2a46b8
    assert (prefix["visible"], prefix["visible_error"]) == ([H200_UUID], None)
    invalid = h200("raw-cvd-invalid.json")["gpus"]  # CUDA_VISIBLE_DEVICES=0,3 on a one-GPU node
    assert invalid["visible"] == [H200_UUID] and "no GPU 3" in str(invalid["visible_error"])

    sw = h200("raw-nvml.json")["software"]
    assert (sw["torch"], sw["torch_cuda"], sw["nccl"]) == ("2.11.0", "13.0", "2.28.9")
    facts = validate_facts(json.loads((H200 / "facts-torchrun-env.json").read_text()), "facts-torchrun-env.json")
    assert facts["gpus"]["devices"][0]["name"] == "NVIDIA H200"
    assert (facts["launch"]["rank"], facts["launch"]["world_size"]) == (0, 2)
