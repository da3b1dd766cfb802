"""NOD: what only `validator node-check` can see on its node (GPUs on the PCI bus, InfiniBand port
state, NTP sync). A leaf: the registry (validator/registry.py) gathers this table."""

from __future__ import annotations

from validator.codes import Code, code, table
from validator.model import Severity

gpus_missing = code(
    "NOD001",
    Severity.ERROR,
    "GPUs missing from the driver",
    """The driver sees every NVIDIA GPU on the node's PCI bus (node-check only).

    A GPU that is on the bus but not in NVML fell off the bus (Xid 79), failed its init, or the
    driver is not loaded at all; jobs scheduled there get fewer GPUs than they asked for and
    fail at `torch.cuda.set_device` or run short.

    Drain the node; read `dmesg | grep -i xid` and `nvidia-smi -q`; reset the GPU or reboot.
    """,
)


ib_port_down = code(
    "NOD002",
    Severity.ERROR,
    "InfiniBand port not active",
    """Every InfiniBand/RoCE port in /sys/class/infiniband is ACTIVE, except ports that are
    administratively disabled (node-check only).

    NCCL uses every HCA it finds (or the ones NCCL_IB_HCA names); a port that is down or stuck
    in INIT (no subnet manager) makes NCCL fail or fall back to sockets, many times slower.

    Check the cable and switch port (`ibstat`), the subnet manager (`sminfo`), and the link
    layer; drain the node until the port is ACTIVE.
    """,
)


nccl_missing = code(
    "NOD003",
    Severity.WARNING,
    "NCCL library not loadable",
    """On a node with GPUs, an NCCL library loads (NCCL_LIB, the nvidia-nccl wheel of the
    validator's Python, or the system library path) and reports its version (node-check only).

    Without NCCL, torch.distributed's nccl backend is unavailable; jobs that bring their own
    NCCL in a container are not affected, hence a warning.

    Install NCCL (libnccl2) on the node or point NCCL_LIB at it.
    """,
)


clock_unsynced = code(
    "NOD004",
    Severity.WARNING,
    "Clock not synchronized",
    """The kernel reports the system clock as synchronized (adjtimex: not TIME_ERROR)
    (node-check only).

    Unsynchronized clocks skew the timestamps of logs and traces across nodes, so `validator
    diagnose` and people misorder events; large skews also break Kerberos/munge credentials.

    Start or fix the time service (chronyd, systemd-timesyncd, ntpd); check `chronyc tracking`.
    """,
)


CODES: dict[str, Code] = table(gpus_missing, ib_port_down, nccl_missing, clock_unsynced)
