"""`validator node-check`: the single-node subset of the checks, for the places operators already
run node checks (Slurm Prolog= and HealthCheckProgram=, node-problem-detector plugins).

The node's facts come from the same agent as `probe`, and the same fact checks run over them
(the ``NODE_CODES`` that make sense for one node without a job); the NOD codes below add what only
the node itself can see (GPUs on the PCI bus, InfiniBand port state, NTP sync). The run has a
hard time budget: facts that are not in by then make the verdict "unknown", never a drain.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from validator.model import Facts, Finding, Report
from validator.nodecheck.codes import clock_unsynced, gpus_missing, ib_port_down, nccl_missing

if TYPE_CHECKING:  # annotations only: profiles load where one is given
    from validator.profiles import Profile

# Fact checks that apply to one node without a job (the rest compare ranks or nodes).
NODE_CODES = ("GPU006", "PRF003", "PRF004", "PRF006", "SYS001", "SYS002", "SYS004", "VAL001")
NVIDIA = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA and 3D controllers; NVSwitches (0x0680) are not GPUs
TIME_ERROR = 5  # adjtimex(2): the clock is not synchronized


# ----------------------------------------------------------------------------- readings


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().strip()


def pci_gpus(sysfs: str = "/sys") -> list[str]:
    """PCI addresses of the NVIDIA GPUs on the bus, whether or not the driver sees them."""
    base = f"{sysfs}/bus/pci/devices"
    out = []
    with contextlib.suppress(OSError):
        for dev in sorted(os.listdir(base)):
            with contextlib.suppress(OSError):
                if _read(f"{base}/{dev}/vendor") == NVIDIA and _read(f"{base}/{dev}/class")[:6] in GPU_CLASSES:
                    out.append(dev)
    return out


def ib_ports(sysfs: str = "/sys") -> dict[str, str]:
    """ "mlx5_0/1" -> the port's state ("4: ACTIVE"), for ports not administratively disabled."""
    base = f"{sysfs}/class/infiniband"
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for dev in sorted(os.listdir(base)):
            with contextlib.suppress(OSError):
                for port in sorted(os.listdir(f"{base}/{dev}/ports"), key=lambda p: int(p) if p.isdecimal() else 0):
                    d = f"{base}/{dev}/ports/{port}"
                    with contextlib.suppress(OSError):
                        if "disabled" in _read(f"{d}/phys_state").lower():
                            continue
                    with contextlib.suppress(OSError):
                        out[f"{dev}/{port}"] = _read(f"{d}/state")
    return out


class _Timex(ctypes.Structure):
    _fields_ = [("modes", ctypes.c_uint), *((n, ctypes.c_long) for n in ("offset", "freq", "maxerror", "esterror")),
                ("status", ctypes.c_int), *((n, ctypes.c_long) for n in ("constant", "precision", "tolerance", "sec",
                "usec", "tick", "ppsfreq", "jitter")), ("shift", ctypes.c_int), *((n, ctypes.c_long) for n in
                ("stabil", "jitcnt", "calcnt", "errcnt", "stbcnt")), ("tai", ctypes.c_int), ("pad", ctypes.c_int * 11)]  # fmt: skip


def clock_synced() -> bool | None:
    """adjtimex(2) with no modes (read-only, unprivileged): None where it cannot be asked."""
    try:
        state = ctypes.CDLL(None).adjtimex(ctypes.byref(_Timex()))
    except (OSError, AttributeError):
        return None
    return None if state < 0 else state != TIME_ERROR


@dataclass
class Readings:
    pci_gpus: list[str] = field(default_factory=list)
    ib_ports: dict[str, str] = field(default_factory=dict)
    clock_synced: bool | None = None

    @classmethod
    def collect(cls, sysfs: str = "/sys") -> Readings:
        return cls(pci_gpus(sysfs), ib_ports(sysfs), clock_synced())


def node_findings(facts: Facts, readings: Readings) -> list[Finding]:
    """The NOD findings of one node."""
    host, gpus, out = facts["host"], facts["gpus"], []
    bus, have = len(readings.pci_gpus), len(facts["gpus"]["devices"])
    if bus > have:
        why = "" if gpus["source"] != "none" else " (no driver answered: not loaded, or NVML failing)"
        out.append(gpus_missing.finding(f"{have}/{bus} GPUs{why}", hosts=[host], expected=str(bus), actual=str(have),
                   fix="drain the node; check dmesg for Xid errors and reset the GPU", verify="nvidia-smi -L"))  # fmt: skip
    down = {port: state for port, state in readings.ib_ports.items() if "ACTIVE" not in state.upper()}
    if down:
        shown = ", ".join(f"{p} {s.split(':')[-1].strip()}" for p, s in list(down.items())[:4])
        out.append(ib_port_down.finding(f"IB {shown}", hosts=[host], expected="ACTIVE", actual=shown,
                   fix="check the cable, switch port and subnet manager", verify="ibstat"))  # fmt: skip
    if (have or bus) and facts["software"]["nccl"] is None:
        out.append(nccl_missing.finding("no NCCL library loads on a GPU node", hosts=[host], expected="libnccl.so.2",
                   actual="not found", fix="install libnccl2 or set NCCL_LIB", verify="ldconfig -p | grep nccl"))  # fmt: skip
    if readings.clock_synced is False:
        out.append(clock_unsynced.finding("clock not synchronized", hosts=[host], expected="synchronized",
                   actual="TIME_ERROR", fix="start the time service", verify="chronyc tracking"))  # fmt: skip
    return out


# ----------------------------------------------------------------------------- the run


class BudgetExceeded(Exception):
    """The facts were not in within the time budget: the verdict is unknown."""


def gather(budget_s: float, sysfs: str = "/sys") -> tuple[Facts, Readings]:
    """This node's facts and readings, or BudgetExceeded. The work runs in a daemon thread that
    is abandoned when late (a hung nvidia-smi or DNS lookup cannot hold the node check)."""
    from validator import pipeline

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = (pipeline.probe_local(None, port_check=False), Readings.collect(sysfs))
        except Exception as e:  # noqa: BLE001 - handed to the caller, which decides per mode
            box["error"] = e

    t = threading.Thread(target=work, name="node-check", daemon=True)
    t.start()
    t.join(max(0.0, budget_s))
    if "error" in box:
        raise box["error"]
    if "result" not in box:
        raise BudgetExceeded("facts not collected within the time budget")
    facts, readings = box["result"]
    return facts, readings


def node_report(facts: Facts, readings: Readings, profile: Profile | None) -> Report:
    from validator.checks import run_checks

    findings = run_checks([facts], profile, NODE_CODES, context="node") + node_findings(facts, readings)
    return Report(
        findings=sorted(findings, key=lambda f: (-f.severity, f.code)),
        participants=1,
        hosts=[facts["host"]],
        title=f"node-check of {facts['host']}",
    )


def drain_reason(findings: list[Finding]) -> str:
    """Short enough for `sinfo -R`: the first finding's code and message, and how many more."""
    first = findings[0]
    more = f" (+{len(findings) - 1})" if len(findings) > 1 else ""
    text = f"{REASON_PREFIX} {first.code} {first.message}"
    return text[: 72 - len(more)] + more


def node_name(facts: Facts | None) -> str:
    """The node's Slurm name: SLURMD_NODENAME (several slurmds can share a host), else the short hostname."""
    name = os.environ.get("SLURMD_NODENAME")
    if name:
        return name
    if facts is not None and facts["hostname"]:
        return facts["hostname"].split(".")[0]
    import socket

    return socket.gethostname().split(".")[0]


REASON_PREFIX = "validator:"  # marks the drains this command made, the only ones --resume undoes


def scontrol(args: list[str], timeout_s: float) -> str:
    """Run scontrol, bounded; its stdout, or RuntimeError with its error."""
    try:
        p = subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, timeout=max(0.5, timeout_s), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"scontrol failed: {e}") from None
    if p.returncode != 0:
        raise RuntimeError(f"scontrol exited {p.returncode}: {' '.join(p.stderr.split())[:200]}")  # one line
    return p.stdout


def drain(node: str, reason: str, timeout_s: float) -> None:
    """`scontrol update nodename=NODE state=drain reason=...`."""
    scontrol(["update", f"nodename={node}", "state=drain", f"reason={reason}"], timeout_s)


def resume_own_drain(node: str, timeout_s: float) -> bool:
    """Resume the node if a drain reason of ours (``validator: ...``) holds it; True if it did.
    A drain by anyone else (an admin, another health check) is left alone."""
    out = scontrol(["show", "node", "-o", node], timeout_s)
    m = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)", out.strip())
    if not m or not m.group(1).startswith(REASON_PREFIX):
        return False
    scontrol(["update", f"nodename={node}", "state=resume"], timeout_s)
    return True


def elapsed(t0: float) -> float:
    return time.monotonic() - t0
