"""--groups: after a pass, every rank creates exactly the process groups of the job's parallel
layout (docs/layout.md: TP, CP, DP, PP, EP, in the framework's rank order) and runs one small
all_reduce in each of its groups, then one timed larger one, each with a per-group deadline; the
job's own NCCL init would meet the same groups minutes later. On the job's port (the coordinator
has released it), gloo on CPU, NCCL where GPUs exist.

Every rank writes what it saw to the rehearsal's store; rank 0 reads every rank's (bounded) and
writes one decision that every rank reads, so all ranks act alike: a group whose collective failed
or hung names its kind, its ranks and the rank and host that failed or never reported (PRE011, an
error: nobody execs), a rank FACTOR times slower than the median of its role and FLOOR_MS above it
is named (PRE012, a warning). In node mode (one wrapper a node) the wrapper starts its node's ranks
as torchrun will number them (``on_node``: one child process a rank, ``python -m
validator.preflight.groups``), once its node rank is known: given (static) or predicted (c10d,
placement.py); the coordinator's node hosts the store, on the endpoint's host.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from typing import Any

GROUP_S = 10.0  # each group's collectives: longer is a hang
BYTES = 1 << 20  # the timed all_reduce
FACTOR, FLOOR_MS = 3.0, 50.0  # a group's collective this much slower than its kind's median group
LATE_MS = 250.0  # a rank this much later than its peers to a collective (CPU ranks share cores: noise)
KEY = "validator/groups/"
AT_ENV = "VALIDATOR_GROUPS_AT"  # `validator rehearse`: a directory where each rank leaves the group it is entering
FAULT = "CV_FAULT_GROUPS"  # tests only (not a VALIDATOR_ name: the agent would collect it as a fact): "delay:KIND:SECONDS" or "exit:KIND" on this rank (with "@R": on rank R alone, for launchers that give every rank one environment)


def rehearse(host: str, port: int, rank: int, world: int, groups: dict[str, list[list[int]]], name: str,
             gpu: int | None = None, timeout: float = 30.0) -> tuple[str | None, list[str]]:  # fmt: skip
    """(what failed, the lines to print) for this rank; every rank gets the same answer."""
    got = decision(host, port, rank, world, groups, name, gpu, timeout)
    return got["error"], list(got["lines"])


def decision(host: str, port: int, rank: int, world: int, groups: dict[str, list[list[int]]], name: str,
             gpu: int | None = None, timeout: float = 30.0, store: Any = None,
             master: bool | None = None) -> dict[str, Any]:  # fmt: skip
    """The rehearsal on this rank: ``decide``'s answer, the same on every rank, or this rank's own
    failure (no culprits). ``store``: one the launcher already hosts (torchrun's agent store, as a
    client; `validator rehearse`); else one on ``host:port``, opened by rank 0 (or where ``master``)."""
    try:
        import torch
        import torch.distributed

        dist: Any = torch.distributed  # TCPStore and PrefixStore are not in its typed exports
    except ImportError:
        return _own("torch is not importable here, so the process groups cannot be rehearsed")
    backend, device = ("nccl", f"cuda:{gpu}") if gpu is not None and torch.cuda.is_available() else ("gloo", "cpu")
    if backend == "nccl":
        torch.cuda.set_device(gpu)
    limit = datetime.timedelta(seconds=timeout)
    if store is None:
        store = dist.TCPStore(host, port, world, rank == 0 if master is None else master, timeout=limit,
                              wait_for_workers=False)  # fmt: skip
    try:
        dist.init_process_group(
            backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=limit
        )
        mine = []
        for kind in sorted(groups):  # every rank creates every group, in the same order
            for members in groups[kind]:
                g = dist.new_group(members, timeout=datetime.timedelta(seconds=GROUP_S))
                if rank in members:
                    mine.append((kind, members, g))
        seen = {kind: _try(dist, torch, device, kind, members, g) for kind, members, g in mine}
        store.set(f"{KEY}{rank}", json.dumps({"host": name, "groups": seen}))
        if rank == 0:
            store.set(f"{KEY}decision", json.dumps(decide(_collect(store, world, timeout), groups, world)))
        store.wait([f"{KEY}decision"], limit)
        decided: dict[str, Any] = json.loads(store.get(f"{KEY}decision"))
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - a failure of the stack is the rehearsal's finding
        return _own(f"{backend} process groups over {world} ranks failed: {type(e).__name__}: {str(e)[:300]}")
    finally:
        del store  # the job's port: released before the job starts
    return decided


CHILD_S = 180.0  # a node's rehearsal ranks, together: past this they are stopped (each stage has its deadline)
REPLY_MAX = 1 << 20  # what a rehearsal rank prints: its decision


def on_node(host: str, port: int, node_rank: int, lws: int, world: int, groups: dict[str, list[list[int]]],
            name: str, gpus: bool = False, master: bool = False) -> tuple[str | None, list[str]]:  # fmt: skip
    """Node mode: this node's ``lws`` ranks (node_rank x lws + local rank, torchrun's numbering),
    one process each, rehearse ``groups`` (``decision``); the first of them hosts the store when
    ``master``. (what failed, the lines to print): the decision, or a rank's own failure."""
    import subprocess
    import sys
    import tempfile

    procs = []
    for local in range(lws):
        rank = node_rank * lws + local
        spec = {"host": host, "port": port, "rank": rank, "world": world, "groups": groups, "name": name,
                "gpu": local if gpus else None, "master": master and local == 0}  # fmt: skip
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(local)}  # the fault hook (FAULT) reads RANK
        out = tempfile.TemporaryFile()  # noqa: SIM115 - read after the process ends, closed below
        p = subprocess.Popen([sys.executable, "-m", "validator.preflight.groups"], stdin=subprocess.PIPE,
                             stdout=out, env=env)  # fmt: skip
        assert p.stdin is not None
        p.stdin.write(json.dumps(spec).encode())
        p.stdin.close()
        procs.append((rank, p, out))
    until = time.monotonic() + CHILD_S
    got: list[dict[str, Any]] = []
    for rank, p, out in procs:
        try:
            p.wait(timeout=max(0.1, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()  # by its pid: ours
            p.wait()
            got.append(_own(f"rank {rank} ({name}) did not finish its rehearsal within {CHILD_S:g} s"))
            continue
        finally:
            out.seek(0)
            text = out.read(REPLY_MAX)
            out.close()
        got.append(_reply(text, rank, name, p.returncode))
    failed = next((g for g in got if g["error"]), None)
    answer = failed or got[0]
    return answer["error"], list(answer["lines"])


def _reply(text: bytes, rank: int, name: str, code: int) -> dict[str, Any]:
    """A rehearsal rank's decision, from its last line of output (its own process: still bounded)."""
    try:
        doc = json.loads(text.strip().rsplit(b"\n", 1)[-1])
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("lines"), list) or "error" not in doc:
        return _own(f"rank {rank} ({name}) ended (exit {code}) without a rehearsal decision")
    return {"error": str(doc["error"])[:2000] if doc["error"] else None, "lines": [str(x) for x in doc["lines"]][:64]}


def main() -> int:
    """One rank of a node-mode rehearsal (``on_node``): its spec on stdin, its decision on stdout."""
    import sys

    spec = json.loads(sys.stdin.buffer.read())
    got = decision(spec["host"], spec["port"], spec["rank"], spec["world"], spec["groups"], spec["name"],
                   spec["gpu"], master=spec["master"])  # fmt: skip
    sys.stdout.write(json.dumps(got) + "\n")
    return 0


def _own(error: str) -> dict[str, Any]:
    return {"error": error, "lines": [], "ranks": [], "hosts": []}


def _try(dist: Any, torch: Any, device: str, kind: str, members: list[int], g: Any) -> dict[str, Any]:
    """One group's small all_reduce (its sum checked; it also lines the members up), then the timed
    one: how late this rank entered it after the line-up ("late": a slow or stalled rank) and how
    long it took here ("s": a member waiting for a late one, or a slow link, shows here)."""
    if at := os.environ.get(AT_ENV):  # `validator rehearse`: where this rank is, should it die here
        _at(at, kind, members)
    spec, _, only = os.environ.get(FAULT, "").partition("@")
    fault = spec.split(":") if only in ("", os.environ.get("RANK")) else []
    if fault[:2] == ["exit", kind]:
        os._exit(1)  # tests: a rank that never joins this group's collective
    try:
        t = torch.ones(1, device=device)
        dist.all_reduce(t, group=g)
        if float(t.item()) != len(members):
            return {"error": f"all_reduce returned {float(t.item()):g}, expected {len(members)}"}
        buf = torch.zeros(BYTES // 4, device=device)
        lined_up = time.perf_counter()
        if fault[:2] == ["delay", kind] and len(fault) > 2:
            time.sleep(float(fault[2]))  # tests: a rank that is slow to reach this group's collective
        t0 = time.perf_counter()
        dist.all_reduce(buf, group=g)
        if device != "cpu":
            torch.cuda.synchronize()
        return {"late": t0 - lined_up, "s": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - a timeout or a lost peer of this group
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}


def _at(directory: str, kind: str, members: list[int]) -> None:
    """``.groups-at-rank<R>.json`` in ``directory``: the group this rank is entering (rehearse reads it
    when no rank answered: the rank that died names its group)."""
    import socket

    path = os.path.join(directory, f".groups-at-rank{os.environ.get('RANK', '0')}.json")
    try:
        with open(path + ".tmp", "w") as f:
            json.dump({"kind": kind, "members": members, "host": socket.gethostname()}, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # the trace directory went away: the rehearsal itself goes on


def _collect(store: Any, world: int, timeout: float) -> dict[int, dict[str, Any]]:
    """Every rank's report that arrives within ``timeout`` (a rank that died never writes one)."""
    keys = [f"{KEY}{r}" for r in range(world)]
    until = time.monotonic() + timeout
    while time.monotonic() < until and not store.check(keys):
        time.sleep(0.05)
    out = {}
    for r, k in enumerate(keys):
        if store.check([k]):
            out[r] = json.loads(store.get(k))
    return out


def decide(reports: dict[int, dict[str, Any]], groups: dict[str, list[list[int]]], world: int) -> dict[str, Any]:
    """What every rank acts on: {"error": text or None, "lines": [...], "ranks": [...], "hosts":
    [...]} from every rank's report (ranks and hosts: those that failed or never reported)."""
    host = {r: str(rep.get("host", "?")) for r, rep in reports.items()}
    failed, lines, named = [], [], set()
    gone = [r for r in range(world) if r not in reports]
    for kind in sorted(groups):
        for members in groups[kind]:
            bad = [(r, reports[r]["groups"].get(kind, {}).get("error")) for r in members if r in reports]
            bad = [(r, e) for r, e in bad if e]
            absent = [r for r in members if r in gone]
            named.update([r for r, _ in bad] + absent)
            if bad or absent:
                who = "; ".join([f"rank {r} ({host[r]}): {e}" for r, e in bad[:4]]
                                + [f"rank {r}: never reported" for r in absent[:4]])  # fmt: skip
                failed.append(f"{kind} group {_ranks(members)}: {who}")
        slow = _slow(reports, groups, kind, host)
        lines += [f"PRE012 slow in its {kind} groups: {s}" for s in slow]
    done = sum(len(v) for v in groups.values())
    if not failed:
        lines.insert(0, f"groups: {done} groups ({', '.join(f'{k} x{len(v)}' for k, v in sorted(groups.items()))}) "
                        f"rehearsed on {world} ranks")  # fmt: skip
    error = "; ".join(failed[:8]) + (f"; and {len(failed) - 8} more" if len(failed) > 8 else "") if failed else None
    culprits = sorted(named)
    return {
        "error": error,
        "lines": lines,
        "ranks": culprits,
        "hosts": sorted({host[r] for r in culprits if r in host}),
    }


def _slow(reports: dict[int, dict[str, Any]], groups: dict[str, list[list[int]]], kind: str,
          host: dict[int, str]) -> list[str]:  # fmt: skip
    """Ranks that reached a collective of ``kind`` FACTOR x later than the role's median and LATE_MS
    more (the rank is slow: its group waited for it); else groups whose collective took FACTOR x
    the median group of the kind and FLOOR_MS more (a slow link: no member to blame)."""

    def figure(r: int, what: str) -> float | None:
        v = reports[r]["groups"].get(kind, {}).get(what)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    late = {r: v for r in reports if (v := figure(r, "late")) is not None}
    out, blamed = [], set()
    if len(late) >= 3:
        med = statistics.median(late.values())
        for r, v in sorted(late.items()):
            if v >= FACTOR * med and (v - med) * 1e3 >= LATE_MS:
                member = next(m for m in groups[kind] if r in m)
                blamed.add(tuple(member))
                out.append(f"rank {r} ({host[r]}) in {kind} group {_ranks(member)}: reached it {v * 1e3:.0f} ms "
                           f"after its peers (median {med * 1e3:.0f} ms)")  # fmt: skip
    took = {tuple(m): statistics.median(xs) for m in groups[kind]
            if (xs := [x for r in m if r in reports and (x := figure(r, "s")) is not None])}  # fmt: skip
    if len(took) >= 3:
        mid = statistics.median(took.values())
        out += [f"{kind} group {_ranks(list(m))}: {t * 1e3:.0f} ms for {BYTES >> 20} MiB (median group {mid * 1e3:.0f} ms)"
                for m, t in took.items() if m not in blamed and t >= FACTOR * mid and (t - mid) * 1e3 >= FLOOR_MS]  # fmt: skip
    return out


def _ranks(members: list[int]) -> str:
    from validator.targets import fold_ranks

    return f"[{fold_ranks(members)}]"


if __name__ == "__main__":
    raise SystemExit(main())
