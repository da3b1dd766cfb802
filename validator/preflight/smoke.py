"""--smoke: after a pass, a tiny all_reduce over the real stack (gloo; NCCL where GPUs exist),
on the job's own rendezvous port (already released by the coordinator), with a short timeout.

After the sum is checked, each participant times a few all_reduces of BYTES (at most TIMED_S)
and the rows (host, seconds, bus bandwidth) are gathered to every participant; rank 0 prints
them, and names a node whose time is FACTOR times the median and above the noise floor, as the
net check does for links. Each rank of a collective waits for the slowest, so the times mostly
show what is local to a node (a late or slow rank); a slow link is the net check's to name.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from dataclasses import dataclass, field

from validator.model import Facts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BYTES = 4 << 20
ITERS = 5
TIMED_S = 2.0
FACTOR = 3.0  # the net check's factor (validator.netcheck.verdict.FACTOR)
FLOOR_MS = 5.0


FAULT = "CV_FAULT_SMOKE"  # tests only: "hang" holds this participant's all_reduce for good ("hang@R": rank R alone)
RANK_KEY = "validator/smoke/rank"  # under c10d: the nodes other than the coordinator's count themselves 1, 2, ...


@dataclass
class Smoke:
    error: str | None = None
    rows: list[tuple[str, float, float]] = field(default_factory=list)  # (host, seconds, bus GB/s)
    rank: int | None = None  # this participant's rank in the smoke's group


def bus_gbps(seconds: float, world: int, size: int = BYTES) -> float:
    """nccl-tests' bus bandwidth of an all_reduce: algbw x 2(n-1)/n."""
    return size / max(seconds, 1e-9) * 2 * (world - 1) / max(world, 1) / 1e9


def per_node(rows: list[tuple[str, float, float]]) -> dict[str, tuple[float, float]]:
    """host -> (its slowest rank's seconds, that rank's bus bandwidth)."""
    out: dict[str, tuple[float, float]] = {}
    for host, s, bw in rows:
        if host not in out or s > out[host][0]:
            out[host] = (s, bw)
    return out


def outliers(rows: list[tuple[str, float, float]]) -> list[str]:
    """Nodes FACTOR times slower than the median node and FLOOR_MS above it (at least 3 nodes)."""
    nodes = per_node(rows)
    if len(nodes) < 3:
        return []
    med = statistics.median(s for s, _ in nodes.values())
    return [h for h, (s, _) in nodes.items() if s >= FACTOR * med and (s - med) * 1e3 >= FLOOR_MS]


def report(rows: list[tuple[str, float, float]]) -> list[str]:
    """The lines rank 0 prints: every node's time and bus bandwidth, then the outliers named."""
    nodes = per_node(rows)
    if not nodes:
        return []
    med = statistics.median(s for s, _ in nodes.values())
    lines = [f"smoke: all_reduce of {BYTES >> 20} MiB per node: median {med * 1e3:.1f} ms"]
    lines += [f"smoke:   {h}: {s * 1e3:.1f} ms, bus {bw:.2f} GB/s" for h, (s, bw) in sorted(nodes.items())]
    lines += [f"smoke: slow node {h}: {nodes[h][0] * 1e3:.1f} ms (median {med * 1e3:.1f} ms)" for h in outliers(rows)]
    return lines


CHILD_S = 15.0  # beyond the smoke's own timeout and timed part: past this its child is stopped
ANSWER_MAX = 1 << 20


def smoke(
    facts: Facts, host: str, port: int, rank: int | None, world: int, timeout: float = 30.0, hosts: bool = False
) -> Smoke:
    """``run`` in a child process, never in this one (it execs the job): NCCL's communicator init
    has no deadline, and a participant whose peer stopped would wait there for good. The child is
    stopped by its pid past ``timeout`` + TIMED_S + CHILD_S; what it printed besides its answer (NCCL's
    own lines, with NCCL_DEBUG) goes to stderr."""
    import sys

    from validator.procs import Child

    spec = {"facts": facts, "host": host, "port": port, "rank": rank, "world": world, "timeout": timeout,
            "hosts": hosts}  # fmt: skip
    limit = timeout + TIMED_S + CHILD_S
    child = Child("validator.preflight.smoke", spec)
    if not child.ended(limit):
        child.stop()
        child.answer()
        return Smoke(f"the all_reduce did not finish within {limit:g} s: a participant stopped, or hangs")
    doc, printed = child.answer(ANSWER_MAX)
    if printed:
        sys.stderr.write(printed.decode(errors="replace")[-(64 << 10) :] + "\n")
    if doc is None or not isinstance(doc.get("rows"), list):
        return Smoke(f"the smoke test ended (exit {child.proc.returncode}) without an answer")
    rows = [(str(r[0]), float(r[1]), float(r[2])) for r in doc["rows"][:4096] if isinstance(r, list) and len(r) == 3]
    rank = doc.get("rank")
    return Smoke(str(doc["error"])[:2000] if doc.get("error") else None, rows, rank if isinstance(rank, int) else None)


def main() -> int:
    """The smoke test's child (``smoke``): its spec on stdin, its answer on stdout, one JSON line."""
    import json
    import sys

    from validator.procs import spec_in

    spec: dict[str, Any] = spec_in()
    got = run(spec["facts"], spec["host"], spec["port"], spec["rank"], spec["world"], spec["timeout"], spec["hosts"])
    sys.stdout.write(json.dumps({"error": got.error, "rows": got.rows, "rank": got.rank}) + "\n")
    return 0


def run(
    facts: Facts, host: str, port: int, rank: int | None, world: int, timeout: float = 30.0, hosts: bool = False
) -> Smoke:
    """Smoke(error=None, rows) when the sum is right; otherwise what went wrong. ``rank`` None (a
    c10d node, numbered by torchrun only later): the participant that coordinated (``hosts``) is
    rank 0 and hosts the store on the job's port; every other takes the next number from it."""
    try:
        import torch
        import torch.distributed
    except ImportError:
        return Smoke(None if world == 1 else "torch is not importable here, so the smoke test cannot run")
    dist: Any = torch.distributed  # TCPStore and PrefixStore are not in its typed exports
    use_nccl = bool(facts["gpus"]["devices"]) and torch.cuda.is_available()
    device = "cpu"
    if use_nccl:
        local = facts["launch"]["local_rank"] or 0
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    addr = f"[{host}]" if ":" in host else host
    name = str(facts["host"] or facts["hostname"] or f"rank {rank}")
    limit = datetime.timedelta(seconds=timeout)
    try:
        if rank is None:
            store = dist.TCPStore(host, port, world, is_master=hosts, timeout=limit)
            rank = 0 if hosts else int(store.add(RANK_KEY, 1))
            init: dict[str, Any] = {"store": dist.PrefixStore("smoke", store)}
            del store  # the process group holds it; it closes with the group
        else:
            init = {"init_method": f"tcp://{addr}:{port}"}
        dist.init_process_group("nccl" if use_nccl else "gloo", rank=rank, world_size=world, timeout=limit, **init)
        spec, _, only = os.environ.get(FAULT, "").partition("@")
        if spec == "hang" and only in ("", str(rank)):
            time.sleep(3600)  # tests: held for good, as NCCL's init holds a participant whose peer stopped
        t = torch.ones(1, device=device)
        dist.all_reduce(t)
        got = float(t.item())
        rows: list[tuple[str, float, float]] = []
        if got == world and world > 1:
            rows = _timed(dist, torch, device, name, world)
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - any failure of the stack is the smoke test's finding
        return Smoke(
            f"{'nccl' if use_nccl else 'gloo'} all_reduce over {world} participants failed: {type(e).__name__}: {e}"
        )
    return Smoke(None, rows, rank) if got == world else Smoke(f"all_reduce returned {got}, expected {world}")


def _timed(dist: object, torch: object, device: str, name: str, world: int) -> list[tuple[str, float, float]]:
    """Every participant's (host, median seconds, bus GB/s) of up to ITERS all_reduces of BYTES."""
    d, tc = dist, torch
    buf = tc.zeros(BYTES // 4, device=device)  # type: ignore[attr-defined]
    d.all_reduce(buf)  # type: ignore[attr-defined]  # warm-up: connections, buffers
    times: list[float] = []
    stop = time.monotonic() + TIMED_S
    go = tc.ones(1, device=device)  # type: ignore[attr-defined]
    for _ in range(ITERS):  # rank 0's clock decides for all, so every rank runs the same count
        go.fill_(1.0 if time.monotonic() < stop else 0.0)
        d.broadcast(go, 0)  # type: ignore[attr-defined]
        if not go.item():
            break
        t0 = time.perf_counter()
        d.all_reduce(buf)  # type: ignore[attr-defined]
        if device != "cpu":
            tc.cuda.synchronize()  # type: ignore[attr-defined]
        times.append(time.perf_counter() - t0)
    mine = statistics.median(times)
    rows: list[object] = [None] * world
    d.all_gather_object(rows, (name, mine, bus_gbps(mine, world)))  # type: ignore[attr-defined]
    return [(str(r[0]), float(r[1]), float(r[2])) for r in rows if isinstance(r, tuple) and len(r) == 3]


if __name__ == "__main__":
    raise SystemExit(main())
