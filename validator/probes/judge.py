"""Judging a probe's figures against the peers. Higher is better (a rate).

A node is a *suspect* for a figure when it is under the peers' median by a FACTOR (relative)
*and* by a gap (absolute): the larger of MAD_K times the peers' spread (the median absolute
deviation, scaled to a standard deviation) and the figure's FLOOR (a spread of zero among
identical nodes must not make a node 1% off a suspect). Below MIN_NODES there is no median to
compare with. A suspect is *confirmed* by a measurement alone when it is still FACTOR times under
``reference``: the first round's median or the slowest control node measured alone beside it,
whichever is more lenient, and by the floor.

A baseline (the median and MAD a known-good set of this hardware measured, `validator baseline
record`) is held to the same test, node by node: a node under it by FACTOR and by the larger of
MAD_K times its spread and the floor is a suspect however few nodes there are, and is confirmed
alone as against the peers' median (``confirmed`` with the baseline's median).
"""

from __future__ import annotations

import statistics

FACTOR = 1.5
MAD_K = 5.0
MAD_SCALE = 1.4826  # MAD of a normal sample x this = its standard deviation
MIN_NODES = 3
FLOORS = {  # the absolute gap, in the figure's unit, by engine
    "python": 0.002,  # GFLOP/s of a pure-Python multiply (about 0.02 on one core)
    "torch-cpu": 1.0,  # GFLOP/s, one thread
    "torch-cuda-fp16": 20_000.0,  # GFLOP/s: 20 TFLOP/s of hundreds
    "copy": 0.3,  # GB/s of host memory
    "device-copy": 50.0,  # GB/s of GPU memory
    "host-to-device": 1.0,  # GB/s over PCIe
}
DEFAULT_FLOOR = 0.0


def floor(key: str) -> float:
    """``key`` is "DEVICE ENGINE" (compute.py / memory.py rows)."""
    return FLOORS.get(key.rsplit(" ", 1)[-1], DEFAULT_FLOOR)


def spread(values: list[float]) -> tuple[float, float]:
    """(median, MAD) of ``values``."""
    med = statistics.median(values)
    return med, statistics.median([abs(v - med) for v in values])


def slow(value: float, reference: float, gap: float) -> bool:
    return value * FACTOR <= reference and reference - value >= gap


def below(value: float, median: float, mad: float, key: str) -> bool:
    """Under ``median`` by FACTOR and by the larger of MAD_K spreads and the floor."""
    return slow(value, median, max(MAD_K * MAD_SCALE * mad, floor(key)))


def suspects(figures: dict[str, float], key: str) -> tuple[float, float, set[str]]:
    """(median, MAD, the nodes under it by FACTOR and the gap) over one figure of the nodes. Each
    node is held to its peers' median and spread without itself: among 4 nodes, a slow one's own
    distance is one of the 4 deviations the MAD is taken over, and can lift the gap past itself."""
    if not figures:
        return 0.0, 0.0, set()
    values = list(figures.values())
    med, mad = spread(values)
    if len(figures) < MIN_NODES:
        return med, mad, set()
    ordered = sorted(values)
    top = ordered[min(len(ordered) - 1, len(ordered) // 2 + 1)]  # the others' median never exceeds it
    out = set()
    for h, v in figures.items():
        if v * FACTOR <= top:
            rest = values.copy()
            rest.remove(v)
            if below(v, *spread(rest), key):
                out.add(h)
    return med, mad, out


def reference(median: float, controls: list[float]) -> float:
    """What a measurement alone is compared with: the first round's median or the slowest
    control, whichever is lower (more lenient)."""
    return min([median, *controls])


def confirmed(value: float, median: float, controls: list[float], key: str) -> bool:
    return slow(value, reference(median, controls), floor(key))
