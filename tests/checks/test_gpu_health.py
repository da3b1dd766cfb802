"""GPU health: the agent's readers (NVML through ctypes, the nvidia-smi health query, the kernel log's
Xid lines from /dev/kmsg or dmesg), their parsing on the controller (validator.facts.gpu) and the
checks GPU007-GPU010. The NVML and nvidia-smi fixtures are constructed from the documentation (no
GPU here; tests/fixtures/gpu/health/README.md); the kernel-log reader runs on real kernel objects."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.factories import check, cpu_job, fires, node_job, only, tweak
from validator.agent import probe
from validator.checks import run_checks
from validator.facts import parse
from validator.facts.gpu import parse_gpus, parse_health, reason_names
from validator.model import Facts, GpuFacts, GpuHealth, Severity

HEALTH = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "health"
AGENT = Path(probe.__file__)
HEALTH_CODES = ["GPU007", "GPU008", "GPU009", "GPU010"]


def smi(name: str, query: str = probe.SMI_HEALTH_QUERIES[0]) -> GpuFacts:
    csv = "\n".join(
        f"{i}, GPU-{i}, NVIDIA H100 80GB HBM3, 00000000:{0x18 + i:02X}:00.0, 81559 MiB, 550.54.15" for i in range(8)
    )
    data = {"query": probe.SMI_FIELDS, "csv": csv, "health": {"query": query, "csv": (HEALTH / name).read_text()}}
    return parse_gpus({"source": "nvidia-smi", "data": data}, {})


def nvml() -> GpuFacts:
    return parse_gpus({"source": "nvml", "data": json.loads((HEALTH / "nvml-health-a100x4.json").read_text())}, {})


def by_index(g: GpuFacts) -> dict[int, GpuHealth]:
    assert g["health"] is not None
    return {d["index"]: d for d in g["health"]["devices"]}


def kmsg_records() -> list[bytes]:
    """tests/fixtures/gpu/health/kmsg-xid.txt as /dev/kmsg records (a line and its continuation lines)."""
    records: list[str] = []
    for line in (HEALTH / "kmsg-xid.txt").read_text().splitlines():
        if line.startswith(" ") and records:
            records[-1] += line + "\n"
        else:
            records.append(line + "\n")
    return [r.encode() for r in records]


def read_kmsg(records: list[bytes]) -> list[list[Any]]:
    """The agent's /dev/kmsg loop over a SOCK_SEQPACKET socket: a real kernel object that, like
    /dev/kmsg, returns one record a read and EAGAIN at the end when non-blocking. More records
    than the socket queues (net.unix.max_dgram_qlen) are written by a thread that then closes its
    end: the reader blocks, and ends at the empty read."""
    reader, writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with reader, writer:
        if len(records) <= 8:
            for r in records:
                writer.send(r)
            reader.setblocking(False)
            return probe.kmsg_xids(reader.fileno())

        def write() -> None:
            for r in records:
                writer.send(r)
            writer.shutdown(socket.SHUT_WR)

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        try:
            return probe.kmsg_xids(reader.fileno())
        finally:
            thread.join()


# ---------------------------------------------------------------- parsing


def test_nvidia_smi_health_csv() -> None:
    h = by_index(smi("smi-health-h100x8.csv"))
    assert h[0] == {
        "index": 0, "ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
        "ecc_corrected_aggregate": 0, "retired_pending": None, "remap_pending": False, "remap_failure": False,
        "clock_reasons": ["gpu_idle"], "pcie_gen": 1, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16,
    }  # fmt: skip
    assert (h[2]["ecc_uncorrected_volatile"], h[2]["remap_pending"]) == (2, True)
    assert h[4]["remap_failure"] is True
    assert h[6]["clock_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    assert (h[5]["pcie_width"], h[5]["pcie_width_max"]) == (8, 16)


def test_not_available_is_unknown_never_zero() -> None:
    """[N/A] and [Not Supported] read as null in every field: a GPU without counters is not healthy."""
    h = by_index(smi("smi-health-h100x8.csv"))[7]
    assert {k: v for k, v in h.items() if k != "index"} == dict.fromkeys(set(h) - {"index"})
    assert by_index(smi("smi-health-h100x8.csv"))[1]["retired_pending"] is None  # Hopper: no page retirement


def test_older_driver_query_without_remapped_rows() -> None:
    h = by_index(smi("smi-health-v100x2-old-driver.csv", probe.SMI_HEALTH_QUERIES[2]))
    assert (h[1]["retired_pending"], h[1]["remap_pending"], h[1]["remap_failure"]) == (True, None, None)
    assert h[0]["clock_reasons"] == ["gpu_idle"] and h[1]["clock_reasons"] == []


def test_nvml_health() -> None:
    g = nvml()
    h = by_index(g)
    assert sorted(h) == [0, 1, 3]  # GPU 2's health calls failed: no entry, not a healthy one
    assert (h[1]["ecc_uncorrected_volatile"], h[1]["remap_pending"], h[1]["remap_failure"]) == (1, True, False)
    assert h[1]["clock_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert (h[3]["remap_pending"], h[3]["ecc_uncorrected_volatile"], h[3]["clock_reasons"]) == (None, None, [])
    assert g["health"] is not None and g["health"]["xid"] is None  # not read: no "xid" in this document


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("0x0000000000000001", ["gpu_idle"]),
        (0x84, ["sw_power_cap", "hw_power_brake_slowdown"]),
        ("0x0000000000000200", ["0x200"]),  # a bit newer than this validator: named by its value
        ("[N/A]", None),
        ("0x" + "f" * 40, None),
        (-1, None),
        (True, None),
    ],
)
def test_reason_names(value: Any, names: list[str] | None) -> None:
    assert reason_names(value) == names


def test_hostile_values_are_bounded() -> None:
    """A node's words are hostile: out-of-range numbers, wrong types and floods read as unknown or are cut."""
    row = "0, 99999999999999999999999, -1, 1.5, 0x10, maybe, 999, 5, 16, 99999, Yes, 2, 0xZZ"
    g = parse_gpus(
        {"source": "nvidia-smi", "data": {"csv": "", "health": {"query": probe.SMI_HEALTH_QUERIES[0], "csv": row}}},
        {},
    )
    h = by_index(g)[0]
    assert [h["ecc_uncorrected_volatile"], h["ecc_corrected_volatile"], h["ecc_uncorrected_aggregate"]] == [None] * 3
    assert (h["retired_pending"], h["remap_failure"], h["clock_reasons"]) == (None, None, None)
    assert (h["pcie_gen"], h["pcie_gen_max"], h["pcie_width_max"]) == (None, 5, None)
    flood = {"source": "nvml", "data": {"devices": [{"index": i, "health": {"pcie_gen": [1]}} for i in range(500)]},
             "xid": {"source": "/dev/kmsg", "events": [[1.0, "NVRM: Xid (PCI:0000:18:00): 79, " + "x" * 5000]] * 500}}  # fmt: skip
    health = parse_health(flood, [])
    assert health is not None and health["xid"] is not None
    assert len(health["devices"]) == 64 and health["devices"][0]["pcie_gen"] is None
    assert len(health["xid"]) == 64 and len(health["xid"][0]["text"]) == 200
    odd = parse_health(
        {
            "source": "nvml",
            "data": {},
            "xid": {"events": [[True, 5], "x", [1e300, "NVRM: Xid (PCI:0000:18:00): 79, y"]]},
        },
        [],
    )
    assert odd is not None and odd["xid"] == [
        {"xid": 79, "pci_bus_id": "0000:18:00.0", "index": None, "age_s": None, "text": "y"}
    ]


def test_older_agent_documents_carry_no_health() -> None:
    """The real H200 captures predate the health reading: not collected (null), not healthy."""
    for src in ("nvml", "nvidia-smi", "proc"):
        raw = json.loads((HEALTH.parent / "h200" / f"raw-{src}.json").read_text())
        assert parse(raw)["gpus"]["health"] is None, src


# ---------------------------------------------------------------- the agent's kernel-log reader


def test_kmsg_records_are_read_until_eagain() -> None:
    before = time.monotonic()
    events = read_kmsg(kmsg_records())
    after = time.monotonic()
    assert [e[1].split("): ", 1)[1].split(",")[0] for e in events] == ["63", "13", "79", "48"]
    assert "SUBSYSTEM" not in events[0][1]  # continuation lines are not part of the message
    age_63 = events[0][0]
    assert before - 2.0 - 0.1 <= age_63 <= after - 2.0 + 0.1  # logged at 2 s after boot


def test_kmsg_reader_keeps_the_last_events_and_cuts_lines() -> None:
    records = [f"4,{n},{n},-;NVRM: Xid (PCI:0000:18:00): 79, {n} {'x' * 1000}\n".encode() for n in range(150)]
    events = read_kmsg(records)
    assert len(events) == probe.XID_MAX and events[-1][1].startswith("NVRM: Xid (PCI:0000:18:00): 79, 149 ")
    assert {len(e[1]) for e in events} == {probe.XID_TEXT}


def test_xid_events_parsed_and_mapped_to_gpus() -> None:
    devices = [
        {"index": i, "uuid": f"GPU-{i}", "name": "H100", "pci_bus_id": bus, "memory_mib": None, "mig_uuids": []}
        for i, bus in enumerate(["0000:10:1c.0", "0000:18:00.0", "0000:2a:00.0"])
    ]
    raw = {
        "source": "nvml",
        "data": {"devices": []},
        "xid": {"source": "/dev/kmsg", "events": read_kmsg(kmsg_records())},
    }
    health = parse_health(raw, devices)  # type: ignore[arg-type]
    assert health is not None and health["xid"] is not None and health["xid_source"] == "/dev/kmsg"
    assert [(e["xid"], e["index"], e["pci_bus_id"]) for e in health["xid"]] == [
        (63, 0, "0000:10:1c.0"), (13, None, "0000:3b:00.0"), (79, 1, "0000:18:00.0"), (48, 2, "0000:2a:00.0")
    ]  # fmt: skip
    assert health["xid"][2]["text"].endswith("GPU has fallen off the bus.")


def test_real_kernel_log_or_its_error(tmp_path: Path) -> None:
    """This machine's /dev/kmsg, and a path that does not exist (the fallback then runs the real
    dmesg): a list of Xid lines (none here) or the reason it could not be read, never an exception."""
    for path in ("/dev/kmsg", str(tmp_path / "no-kmsg")):
        got = probe.xid_events(path)
        assert isinstance(got.get("events"), list) or (got["source"] is None and got["error"]), got
        assert all(probe.XID_MARK in e[1] for e in got.get("events", []))


def test_dmesg_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /dev/kmsg cannot be opened, `dmesg`'s lines; a fake `dmesg` on PATH prints the fixture
    (this machine's kernel log holds no Xid, and writing one into it would touch the host)."""
    fake = tmp_path / "dmesg"
    fake.write_text(f"#!/bin/sh\ncat {HEALTH / 'dmesg-xid.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = probe.xid_events(str(tmp_path / "no-kmsg"))
    assert got["source"] == "dmesg" and [e[0] is None for e in got["events"]] == [False, True]
    assert got["events"][0][1].startswith("NVRM: Xid (PCI:0000:18:00): 79,")
    fake.write_text("#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    got = probe.xid_events(str(tmp_path / "no-kmsg"))
    assert got["source"] is None and "Operation not permitted" in got["error"]


def test_real_agent_without_gpus_reads_no_health() -> None:
    """The agent run as it is shipped, on this GPU-less machine: no GPU stack, so no health facts, no
    kernel log read, and no GPU health finding."""
    for args in ([], ["--gpu-sources", "proc"]):
        out = subprocess.run([sys.executable, str(AGENT), "--no-port-probe", *args], capture_output=True, text=True,
                             timeout=60, check=True)  # fmt: skip
        raw = json.loads(out.stdout)
        assert raw["gpus"] is None, "this machine has a GPU stack: the test expects none"
        facts = parse(raw)
        assert facts["gpus"]["health"] is None
        assert [f.code for f in run_checks([facts], codes=HEALTH_CODES)] == []


# ---------------------------------------------------------------- checks


def with_health(job: list[Facts], index: int, g: GpuFacts) -> list[Facts]:
    return tweak(job, index, gpus={"health": g["health"]})


@fires("GPU007")
def test_memory_errors_name_host_and_gpu() -> None:
    job = with_health(node_job(3), 1, smi("smi-health-h100x8.csv"))
    findings = check(job, "GPU007")
    assert [(f.hosts, f.message) for f in findings] == [
        (["node002"], "GPU 2 on node002: 2 uncorrectable ECC error(s) since the driver loaded"),
        (["node002"], "GPU 2 on node002: rows are pending remapping"),
        (["node002"], "GPU 4 on node002: a row remapping failed (no spare rows left)"),
    ]
    assert all(f.severity == Severity.ERROR and "drain the node" in f.fix for f in findings)
    assert "RMA" in findings[2].fix


@fires("GPU007")
def test_pending_page_retirement_and_nvml() -> None:
    job = with_health(node_job(2), 0, smi("smi-health-v100x2-old-driver.csv", probe.SMI_HEALTH_QUERIES[2]))
    assert only(check(job, "GPU007")).message == "GPU 1 on node001: pages are pending retirement"
    job = with_health(node_job(2), 1, nvml())
    assert [f.message for f in check(job, "GPU007")] == [
        "GPU 1 on node002: 1 uncorrectable ECC error(s) since the driver loaded",
        "GPU 1 on node002: rows are pending remapping",
    ]


def test_the_same_problem_on_several_hosts_is_one_finding() -> None:
    job = node_job(4)
    for i in (0, 2):
        job = with_health(job, i, smi("smi-health-h100x8.csv"))
    f = [f for f in check(job, "GPU007") if "remapping failed" in f.message]
    assert only(f).hosts == ["node001", "node003"] and only(f).message.startswith("GPU 4 on node[001,003]: ")


@fires("GPU008")
def test_pcie_link_width_always_generation_only_when_busy() -> None:
    job = with_health(node_job(2), 0, smi("smi-health-h100x8.csv"))
    assert [f.message for f in check(job, "GPU008")] == [
        "GPU 3 on node001: PCIe link Gen4 of Gen5 while the GPU is busy",
        "GPU 5 on node001: PCIe link x8 of x16",
    ]  # GPU 0 and 4 idle at Gen1 of Gen5: power saving, no finding
    assert check(with_health(node_job(2), 0, nvml()), "GPU008") == []  # A100 idle at Gen1 of Gen4


@fires("GPU009")
def test_hardware_slowdowns() -> None:
    job = with_health(node_job(2), 0, smi("smi-health-h100x8.csv"))
    f = only(check(job, "GPU009"))
    assert f.message == "GPU 6 on node001: clocks held down by HW slowdown, HW thermal slowdown"
    assert f.severity == Severity.WARNING
    nv = check(with_health(node_job(2), 1, nvml()), "GPU009")
    assert only(nv).message == "GPU 1 on node002: clocks held down by HW slowdown, HW power brake"


def xid_job(events: list[list[Any]]) -> list[Facts]:
    devices = node_job(2)[1]["gpus"]["devices"]  # GPU i at 0000:{0x18 + 0x10 * i}:00.0
    health = parse_health({"source": "nvml", "data": {}, "xid": {"source": "/dev/kmsg", "events": events}}, devices)
    return tweak(node_job(2), 1, gpus={"health": health})


@fires("GPU010")
def test_xid_errors_with_their_meaning() -> None:
    job = xid_job([
        [60.0, "NVRM: Xid (PCI:0000:28:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."],
        [50.0, "NVRM: Xid (PCI:0000:38:00): 94, pid=4321, name=python3, Contained: CE User Channel (0x9)."],
        [40.0, "NVRM: Xid (PCI:0000:38:00): 94, pid=4322, name=python3, Contained: CE User Channel (0x9)."],
        [30.0, "NVRM: Xid (PCI:0000:3b:00): 13, pid=2044, Graphics SM Warp Exception"],  # the application's fault
        [3 * 86400.0, "NVRM: Xid (PCI:0000:18:00): 48, An uncorrectable double bit error"],  # days ago: history
        [None, "NVRM: Xid (PCI:0000:99:00): 74, NVLink: fatal error detected on link 3"],  # no timestamp: recent
    ])  # fmt: skip
    findings = check(job, "GPU010")
    assert [f.message for f in findings] == [
        "Xid 79 (GPU has fallen off the bus) on GPU 1 of node002",
        "Xid 94 (contained ECC error: the application on it was stopped) on GPU 2 of node002, 2 times",
        "Xid 74 (NVLink error) on the GPU at 0000:99:00.0 of node002",
    ]
    assert all(f.hosts == ["node002"] and f.severity == Severity.ERROR for f in findings)


def test_healthy_or_unknown_gpus_make_no_finding() -> None:
    """Idle GPUs at a low link generation, corrected errors, [N/A] everywhere, an unreadable kernel
    log: silent. A CPU job never hears of GPU health."""
    healthy: GpuFacts = smi("smi-health-h100x8.csv")
    assert healthy["health"] is not None
    healthy["health"]["devices"] = [d for d in healthy["health"]["devices"] if d["index"] in (0, 1, 7)]
    job = with_health(node_job(2), 0, healthy)
    job = tweak(job, 1, gpus={"health": {"devices": [], "xid": None, "xid_source": None, "xid_error": "EPERM"}})
    assert [f.code for f in run_checks(job, codes=HEALTH_CODES)] == []
    cpu = cpu_job()
    assert [f.code for f in run_checks(cpu, codes=HEALTH_CODES)] == []


H200 = HEALTH.parent / "h200"  # captured on a real H200 (gpu-capture/probes.sh; its README.md)


def test_a_real_healthy_h200_reads_alike_by_nvml_and_nvidia_smi_and_fires_nothing() -> None:
    """The agent's raw output on a real, idle, healthy H200 (driver 580.159.04), read through NVML
    and through the nvidia-smi health query: the same health, and no health finding (idle is a clock
    reason, not a fault; Gen5 x16 of Gen5 x16). The older spelling of the query
    (clocks_throttle_reasons.active, no remapped rows) is answered by the same driver, and read."""
    views = {src: parse(json.loads((H200 / f"raw-{src}-health.json").read_text()))["gpus"]
             for src in ("nvml", "nvidia-smi")}  # fmt: skip
    healths = {src: by_index(g)[0] for src, g in views.items()}
    for src, h in healths.items():
        assert (h["ecc_uncorrected_volatile"], h["ecc_corrected_aggregate"], h["remap_pending"]) == (0, 0, False), src
        assert (h["pcie_gen"], h["pcie_gen_max"], h["pcie_width"], h["pcie_width_max"]) == (5, 5, 16, 16), src
        assert h["clock_reasons"] == ["gpu_idle"], src
        health = views[src]["health"]
        assert health is not None and (health["xid"], health["xid_source"], health["xid_error"]) == (
            [],
            "/dev/kmsg",
            None,
        )
    keys = ("ecc_uncorrected_volatile", "ecc_corrected_volatile", "remap_pending", "remap_failure", "clock_reasons")
    assert {k: healths["nvml"][k] for k in keys} == {k: healths["nvidia-smi"][k] for k in keys}
    for src in views:
        job = with_health(node_job(2), 0, views[src])
        assert [f.code for f in run_checks(job, codes=HEALTH_CODES)] == [], src
    older = smi("../h200/smi-health-throttle-spelling.csv", probe.SMI_HEALTH_QUERIES[2])
    assert by_index(older)[0]["clock_reasons"] == ["gpu_idle"] and by_index(older)[0]["remap_pending"] is None
    assert (
        H200 / "smi-health.csv"
    ).read_text().strip() == "0, 0, 0, 0, 0, [N/A], 5, 5, 16, 16, No, No, 0x0000000000000001"
