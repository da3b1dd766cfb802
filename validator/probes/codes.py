"""PRB: findings of the node probes (`validator scan --probes`): a node slower than its peers in
compute or memory bandwidth, confirmed alone; a probe that did not run; most nodes under their
baseline. The probes' rounds (validator/probes/rounds.py) make the findings; these records carry
their documentation."""

from __future__ import annotations

from validator.codes import Code, code, table
from validator.model import Severity

VERIFY = "validator scan NODES --probes   # no PRB001/PRB002 for the node"
VERIFY_BASELINE = "validator scan NODES --probes --profile FILE   # no PRB004"

slow_compute = code(
    "PRB001",
    Severity.WARNING,
    "Slow node: compute",
    """Every node multiplies a fixed matrix (torch on each GPU; torch or pure Python on the CPU)
    over and over, five windows of 0.25 s; its figure is the second-fastest window's rate. A node
    whose figure is under the peers' median by a factor of 1.5 and by a gap of five times the
    peers' spread (MAD) and an absolute floor is a suspect; it is measured again alone, twice,
    beside control nodes measured alone too, and named only when it is slow every time. With a
    profile whose baselines have the node's hardware (`validator baseline record`), the node is
    also held to the baseline by the same factor and gap, however few nodes are scanned; the
    finding says which named it, the baseline or the peers.

    A synchronous job runs every step at the pace of its slowest rank: one GPU held at a low clock
    (power or thermal throttling, a PCIe or NVLink fault) or one node with a CPU quota, a runaway
    process or a bad DIMM costs the whole job its speed, with nothing in its logs.

    Take the node out of the job (the report's exclusion lines), then look at its clocks and
    throttle reasons (`nvidia-smi -q -d PERFORMANCE`), its load and its cgroup's CPU quota.
    """,
)

slow_memory = code(
    "PRB002",
    Severity.WARNING,
    "Slow node: memory bandwidth",
    """Every node copies between two 64 MiB buffers over and over (and, where torch sees a GPU,
    within each device's memory and from host to device), five windows of 0.25 s; its figure is
    the second-fastest window's bytes per second. A node under the peers' median by a factor of
    1.5, by five times the peers' spread (MAD) and by an absolute floor is measured again alone,
    twice, beside control nodes, and named only when it is slow every time; so is a node under the
    profile's baseline for its hardware (`validator baseline record`), even alone.

    Data loading, optimizer steps on the CPU and every host-to-device copy run at memory speed;
    a node with a DIMM missing or failed, memory in the wrong slots, or a CPU held back is slow
    at all of them.

    Take the node out of the job (the report's exclusion lines); check its memory population
    (`dmidecode -t memory`), its NUMA settings and its load.
    """,
)

not_run = code(
    "PRB003",
    Severity.WARNING,
    "Node probe did not run",
    """The compute and memory probes ran on every node that answered the scan.

    Where a probe failed (python3 stopped, an out-of-memory kill, a timeout, a device error)
    the node's speed is unknown, which its peers' figures cannot make up for.

    Rerun the scan with --probes; read the probe's error in the finding, and the node's load.
    """,
)

set_below = code(
    "PRB004",
    Severity.WARNING,
    "Most nodes below their baseline",
    """With a profile whose baselines have the nodes' hardware (`validator baseline record`), at
    most half of the nodes of one hardware type are under its baseline for a figure, by the factor
    of 1.5 and the gap PRB001 and PRB002 use. When more than half of them are (two or more), the
    baseline names none of them, and none is measured again or taken out: this finding lists them,
    with their median and the baseline's.

    A baseline most nodes miss says more about the baseline, or about what every node shares, than
    about any one node: it was recorded on other hardware or settings, or since then every node
    changed (a driver or firmware update, clocks or a power cap set fleet-wide, a virtual machine
    host shared with other tenants). Taking most of the set out would leave no job to run.

    Find out what changed on every node (driver, firmware, clocks, power limit, what else runs
    there). If the set is healthy as it is, record the baseline again on known-good nodes
    (`validator baseline record NODES --profile FILE`).
    """,
)

CODES: dict[str, Code] = table(slow_compute, slow_memory, not_run, set_below)
