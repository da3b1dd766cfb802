"""GPU health (GPU007-GPU010): memory errors, the PCIe link, clock slowdowns and Xid events of each
node's GPUs, as its agent read them through NVML or nvidia-smi and the kernel log (docs/scan.md,
"GPU health"). One finding per GPU problem, naming the host and the GPU's index; the same problem
on several hosts is one finding naming them all. Silent where nothing was read (no GPU, an older
agent): unknown is never healthy or broken."""

from __future__ import annotations

from collections.abc import Iterator

from validator.checks.base import Check, Hit, Job, check
from validator.codes import table
from validator.model import GpuHealth, GpuHealthFacts, Severity, XidEvent
from validator.targets import fold_hosts

SMI_HEALTH = (
    "nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
    "remapped_rows.pending,remapped_rows.failure --format=csv   # on each named host"
)
SMI_PCIE = (
    "nvidia-smi --query-gpu=index,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
    "pcie.link.width.max --format=csv   # under load, on each named host"
)
SMI_CLOCKS = "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER   # on each named host"
XID_GREP = "dmesg -T | grep -i 'NVRM: Xid'   # on each named host"
DRAIN = "drain the node"
LINK_FIX = "reseat the GPU or its riser, or drain the node"
SLOWDOWN_FIX = "check its cooling and power, or drain the node"

# Active clock-event reasons that mean the hardware is being held back (nvml.h): the others (idle,
# application clocks, the software power cap, sync boost, display clocks) are how a healthy GPU runs.
SLOWDOWNS = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
    "sw_thermal_slowdown": "SW thermal slowdown",
}

# The Xids that mean a GPU should not run a job, and what each means (NVIDIA's Xid catalog,
# docs.nvidia.com/deploy/xid-errors).
XIDS = {
    48: "double-bit ECC error (uncorrectable)",
    63: "ECC page retirement or row remapping recorded: the GPU needs a reset",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error: the application on it was stopped",
    95: "uncontained ECC error: every application on the GPU was stopped",
}
XID_RECENT_S = 24 * 3600  # older Xids are history: the counters above say whether the damage remains


def _health(job: Job) -> Iterator[tuple[int, str, GpuHealthFacts]]:
    """(a participant, its host, the health its node's agent read), once a node."""
    if not job.uses_gpus:
        return
    for i in job.node_reps:
        health = job.facts[i]["gpus"].get("health")
        if health:
            yield i, job.host(i), health


Found = dict[tuple[int, str, str], list[tuple[int, str]]]  # (GPU index, problem, fix) -> (participant, host)


def _grouped(found: Found, job: Job, verify: str) -> Iterator[Hit]:
    """One hit per (GPU index, problem), naming every host that has it."""
    for (index, what, fix), where in found.items():
        hosts = list(dict.fromkeys(host for _, host in where))
        members = [m for i, _ in where for m in job.node_of(i)]
        yield Hit(f"GPU {index} on {fold_hosts(hosts)}: {what}", members, hosts=hosts, fix=fix, verify=verify)


def _problems(job: Job) -> dict[str, Found]:
    """The problems of GPU007-GPU009 of every GPU, found in one pass shared by the three checks
    (12,500 nodes of 8 GPUs: 100,000 records)."""

    def compute() -> dict[str, Found]:
        out: dict[str, Found] = {"GPU007": {}, "GPU008": {}, "GPU009": {}}
        for i, host, health in _health(job):
            for g in health["devices"]:
                for what, fix in _memory_problems(g):
                    out["GPU007"].setdefault((g["index"], what, fix), []).append((i, host))
                if link := _link(g):
                    out["GPU008"].setdefault((g["index"], link, LINK_FIX), []).append((i, host))
                reasons = g["clock_reasons"]
                if reasons and not SLOWDOWNS.keys().isdisjoint(reasons):
                    slow = "clocks held down by " + ", ".join(SLOWDOWNS[r] for r in reasons if r in SLOWDOWNS)
                    out["GPU009"].setdefault((g["index"], slow, SLOWDOWN_FIX), []).append((i, host))
        return out

    return job.memo("gpuhealth.problems", compute)


def _memory_problems(g: GpuHealth) -> list[tuple[str, str]]:
    """(what, fix) for each memory problem of one GPU."""
    out: list[tuple[str, str]] = []
    if not (g["ecc_uncorrected_volatile"] or g["remap_failure"] or g["remap_pending"] or g["retired_pending"]):
        return out  # the usual case
    if g["ecc_uncorrected_volatile"]:
        out.append((f"{g['ecc_uncorrected_volatile']} uncorrectable ECC error(s) since the driver loaded",
                    f"{DRAIN}; reset the GPU (nvidia-smi -r) or reboot, and replace it if they return"))  # fmt: skip
    if g["remap_failure"]:
        out.append(("a row remapping failed (no spare rows left)", f"{DRAIN} and have the GPU replaced (RMA)"))
    if g["remap_pending"]:
        out.append(("rows are pending remapping", f"{DRAIN} and reset the GPU (nvidia-smi -r) or reboot to apply them"))
    if g["retired_pending"]:
        out.append(
            ("pages are pending retirement", f"{DRAIN} and reset the GPU (nvidia-smi -r) or reboot to apply them")
        )
    return out


@check("GPU007", Severity.ERROR, "GPU memory errors: uncorrectable ECC, failed or pending remapping")
def gpu_memory(job: Job) -> Iterator[Hit]:
    """No GPU of the job has uncorrectable ECC errors since the driver loaded (volatile count), a
    failed row remapping, or rows or pages waiting for a reset to be remapped or retired.

    An uncorrectable error kills the process that touched the memory (Xid 48/94/95) and often
    recurs; a pending remapping or retirement is applied only at the next GPU reset, and until
    then the faulty memory is fenced off page by page; a failed remapping means the GPU has no
    spare rows left. Any of them on one GPU stops or corrupts a synchronous job on every rank.

    Drain the node. Reset the GPU (`nvidia-smi -r`, or reboot) to apply pending remappings and
    retirements, and have a GPU with a failed remapping or recurring uncorrectable errors replaced.
    Corrected errors alone are not a finding: ECC is doing its job.
    """
    yield from _grouped(_problems(job)["GPU007"], job, SMI_HEALTH)


def _link(g: GpuHealth) -> str | None:
    """What is wrong with one GPU's PCIe link, if anything: fewer lanes than the slot and device
    can do, at any time; a lower generation only while the GPU is busy (an idle GPU lowers its link
    generation to save power, as it is designed to)."""
    width, wmax, gen, gmax = g["pcie_width"], g["pcie_width_max"], g["pcie_gen"], g["pcie_gen_max"]
    if width is not None and wmax is not None and width < wmax:
        return f"PCIe link x{width} of x{wmax}"
    if gen is None or gmax is None or gen >= gmax:
        return None
    reasons = g["clock_reasons"]
    return (
        None if reasons is None or "gpu_idle" in reasons else f"PCIe link Gen{gen} of Gen{gmax} while the GPU is busy"
    )


@check("GPU008", Severity.WARNING, "GPU PCIe link below its maximum")
def pcie_link(job: Job) -> Iterator[Hit]:
    """Every GPU's PCIe link runs at the width (lanes) its device and slot can do, and at their
    generation while the GPU is busy.

    A link that trained at x8 instead of x16, or at Gen3 instead of Gen5, halves or quarters
    host-to-device copies and, where NCCL goes over PCIe (no NVLink, GPUDirect RDMA to the NIC),
    every collective that GPU takes part in. A reseated card or a bad riser is the usual cause.
    An idle GPU lowers its link generation to save power: a lower generation is only a finding
    when the GPU is not idle (its `gpu_idle` clock reason is not active); fewer lanes always are.

    Check the link under load (`nvidia-smi -q -d PCIE` while a job runs); reseat the GPU or its
    riser, or drain the node until it is repaired.
    """
    yield from _grouped(_problems(job)["GPU008"], job, SMI_PCIE)


@check("GPU009", Severity.WARNING, "GPU clocks held down by a hardware or thermal slowdown")
def clock_slowdown(job: Job) -> Iterator[Hit]:
    """No GPU has a hardware slowdown, a hardware or software thermal slowdown, or a power brake
    among its active clock-event (throttle) reasons.

    These halve the clocks or more, so the GPU computes at a fraction of its peers' speed and
    every rank of a synchronous job waits for it. An idle GPU, application clocks, the software
    power cap and sync boost are how a healthy GPU runs and are not findings.

    Check cooling (fans, inlet temperature, airflow), the power supply (a power brake is asserted
    by the system), and `nvidia-smi -q -d PERFORMANCE`; drain the node until it runs at full clocks.
    """
    yield from _grouped(_problems(job)["GPU009"], job, SMI_CLOCKS)


def _xid_gpu(e: XidEvent) -> str:
    return f"GPU {e['index']}" if e["index"] is not None else f"the GPU at {e['pci_bus_id']}"


@check("GPU010", Severity.ERROR, "Xid error in the kernel log")
def xid_errors(job: Job) -> Iterator[Hit]:
    """The kernel log of no node holds, from the last 24 hours, an Xid that means a GPU is
    unfit: 48 (double-bit ECC), 63 and 64 (page retirement or row remapping recorded or failed),
    74 (NVLink), 79 (fallen off the bus), 92 (high single-bit ECC rate), 94 and 95 (contained and
    uncontained ECC errors).

    The NVIDIA driver logs an Xid when a GPU fails; these leave the GPU unusable, in need of a
    reset, or likely to fail again, and a job placed on it dies or hangs. An Xid without a
    timestamp counts as recent; older ones are history (the ECC and remapping counters, GPU007,
    say whether the damage remains).

    Drain the node and follow NVIDIA's Xid catalog for the number (reset the GPU, reboot, or
    replace it); `dmesg -T | grep -i xid` shows the lines.
    """
    found: dict[tuple[str, int, str], list[int]] = {}
    for i, host, health in _health(job):
        for e in health["xid"] or ():
            if e["xid"] in XIDS and (e["age_s"] is None or e["age_s"] <= XID_RECENT_S):
                found.setdefault((host, e["xid"], _xid_gpu(e)), []).append(i)
    for (host, xid, gpu), where in found.items():
        yield Hit(
            f"Xid {xid} ({XIDS[xid]}) on {gpu} of {host}" + (f", {len(where)} times" if len(where) > 1 else ""),
            job.node_of(where[0]),
            hosts=[host],
            expected="no Xid",
            actual=f"Xid {xid}",
            fix=f"{DRAIN}; reset the GPU or reboot, and replace it if it recurs",
            verify=XID_GREP,
        )


CODES: dict[str, Check] = table(gpu_memory, pcie_link, clock_slowdown, xid_errors)
