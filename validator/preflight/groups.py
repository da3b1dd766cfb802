"""--groups: after a pass, every rank creates exactly the process groups of the job's parallel
layout (docs/layout.md: TP, CP, DP, PP, EP, in the framework's rank order) and runs one small
all_reduce in each of its groups, then one timed larger one, each with a per-group deadline; the
job's own NCCL init would meet the same groups minutes later. On the job's port (the coordinator
has released it), gloo on CPU, NCCL where GPUs exist.

Every rank writes what it saw to the rehearsal's store; rank 0 reads every rank's (bounded) and
writes one decision that every rank reads, so all ranks act alike: a group whose collective failed
or hung names its kind, its ranks and the rank and host that failed or never reported (PRE011, an
error: nobody execs), a rank FACTOR times slower than the median of its role and FLOOR_MS above it
is named (PRE012, a warning). Each rank rehearses in a child process (``on_node``: ``python -m
validator.preflight.groups``), stopped by its pid at a deadline: per rank, the participant starts
its own; in node mode (one wrapper a node) the wrapper starts its node's ranks as torchrun will
number them, once its node rank is known: given (static) or predicted (c10d, placement.py); the
coordinator's node hosts the store, on the endpoint's host. A rank that stops or hangs in a group
never reports; the group each rank last entered tells a culprit from the ranks it holds up.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import statistics
import threading
import time
from typing import Any

JOINED_MAX = 4096  # ranks looked up one by one for the "never joined" line, at most
GROUP_S = 10.0  # each group's collectives: longer is a hang
BYTES = 1 << 20  # the timed all_reduce
FACTOR, FLOOR_MS = 3.0, 50.0  # a group's collective this much slower than its kind's median group
LATE_MS = 250.0  # a rank this much later than its peers to a collective (CPU ranks share cores: noise)
BEAT_S, DEAD_S = 0.5, 5.0  # a rank says it is alive this often; one silent this long after it beat is gone
KEY = "validator/groups/"
AT_ENV = "VALIDATOR_GROUPS_AT"  # `validator rehearse`: a directory where each rank leaves the group it is entering
FAULT = "CV_FAULT_GROUPS"  # tests only (not a VALIDATOR_ name: the agent would collect it as a fact): "delay:KIND:SECONDS", "exit:KIND", "hang:KIND" or "late:SECONDS" (before it reads the decision) on this rank (with "@R": on rank R alone, for launchers that give every rank one environment)


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
    own, hosting = store is None, (rank == 0 if master is None else master) and store is None
    try:
        if own:
            try:
                store = dist.TCPStore(host, port, world, hosting, timeout=limit, wait_for_workers=False)
            except Exception as e:  # noqa: BLE001 - the job's port taken, or no store there: said in one line
                where = f"{'[' + host + ']' if ':' in host else host}:{port}"
                what = "cannot open the rehearsal's store on" if hosting else "no rehearsal store reached at"
                return _own(f"{what} {where} (the job's port): {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        store.set(f"{KEY}joined/{rank}", name)  # a rank that never says so stopped before the rehearsal
        store.add(f"{KEY}joined", 1)
        beating = threading.Event()
        if own:  # our store on host:port (a launcher's, in `rehearse`, is not reached so: no count, waited as before)
            store.add(f"{KEY}beat/{rank}", 1)  # the first beat, before anything can stop this rank
            threading.Thread(target=_beat, args=(host, port, world, rank, beating), daemon=True).start()
        dist.init_process_group(
            backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=limit
        )
        mine = []
        for kind in sorted(groups):  # every rank creates every group, in the same order
            for members in groups[kind]:
                g = dist.new_group(members, timeout=datetime.timedelta(seconds=GROUP_S))
                if rank in members:
                    mine.append((kind, members, g))
        work = 2 * GROUP_S * len(groups)  # every rank's collectives, two a group kind, GROUP_S apiece
        if rank == 0:  # decides beside its own groups: held in one (NCCL's init waits forever), it still decides;
            # on a connection of its own where it can (a client waiting holds its connection)
            mine_too = dist.TCPStore(host, port, world, False, timeout=limit) if own else store
            threading.Thread(target=_decide, args=(mine_too, world, groups, timeout, work), daemon=True).start()
        seen = {}
        for kind, members, g in mine:  # where this rank is: should it stop here, the others say which group
            store.set(f"{KEY}at/{rank}", json.dumps({"kind": kind, "members": members, "host": name}))
            seen[kind] = _try(dist, torch, device, kind, members, g)
        store.set(f"{KEY}{rank}", json.dumps({"host": name, "groups": seen}))
        store.add(f"{KEY}reported", 1)
        spec, _, only = os.environ.get(FAULT, "").partition("@")
        if spec.startswith("late:") and only in ("", str(rank)):
            time.sleep(float(spec[5:]))  # tests: a rank slow to read the decision (a busy node)
        until = time.monotonic() + timeout + work + 5
        while not store.check([f"{KEY}decision"]):  # polled: a wait would hold the connection rank 0 decides on
            if time.monotonic() > until:
                raise TimeoutError(f"no decision within {timeout + work + 5:g} s of this rank's report")
            time.sleep(0.05)
        decided: dict[str, Any] = json.loads(store.get(f"{KEY}decision"))
        beating.set()
        _leave(store, hosting, timeout)
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - a failure of the stack is the rehearsal's finding
        why = f"{backend} process groups over {world} ranks failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        absent = []
        with contextlib.suppress(Exception):  # the store may be gone with rank 0
            absent = [r for r in range(min(world, JOINED_MAX)) if not store.check([f"{KEY}joined/{r}"])]
        if absent:  # every rank sees the same: it names them alike
            why = f"rank {_ranks(absent)[1:-1]} never joined the rehearsal (it stopped, or has no torch): {why}"
        _leave(store, hosting, timeout)
        return _own(why)
    finally:
        store = None  # the job's port: released before the job starts
    return decided


CHILD_S = 180.0  # a node's rehearsal ranks, together: past this they are stopped (each stage has its deadline)
HELD_S = 5.0  # once one has the decision, the rest are held by the culprit it names (NCCL's init never returns)
REPLY_MAX = 1 << 20  # what a rehearsal rank prints: its decision


def on_node(host: str, port: int, node_rank: int, lws: int, world: int, groups: dict[str, list[list[int]]],
            name: str, gpus: bool = False, master: bool = False, local0: int = 0) -> tuple[str | None, list[str]]:  # fmt: skip
    """This node's ``lws`` ranks (node_rank x lws + local rank, torchrun's numbering), one process
    each, rehearse ``groups`` (``decision``); the first of them hosts the store when ``master``. A
    child process, never this one: NCCL stays out of the process that execs the job, and a rank held
    in a group forever (NCCL's init has no deadline) is stopped by its pid. Per-rank mode is one
    rank (``lws`` 1) whose local rank is ``local0``. (what failed, the lines to print): the
    decision, or a rank's own failure."""
    from validator.procs import Child

    procs = []
    for i in range(lws):
        rank, local = node_rank * lws + i, local0 + i
        spec = {"host": host, "port": port, "rank": rank, "world": world, "groups": groups, "name": name,
                "gpu": local if gpus else None, "master": master and i == 0}  # fmt: skip
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(local)}  # the fault hook (FAULT) reads RANK
        procs.append((rank, Child("validator.preflight.groups", spec, env)))
    until = time.monotonic() + CHILD_S
    got: dict[int, dict[str, Any]] = {}
    while len(got) < len(procs) and time.monotonic() < until:
        for rank, child in procs:
            if rank not in got and child.ended():
                got[rank] = _reply(child.answer(REPLY_MAX)[0], rank, name, child.proc.returncode)
                if not got[rank].get("own"):  # the decision: whoever is still running is held
                    until = min(until, time.monotonic() + HELD_S)
        time.sleep(0.05)
    decided = any(not g.get("own") for g in got.values())
    for rank, child in procs:
        if rank not in got:
            child.stop()
            child.answer()
            if not decided:
                got[rank] = _own(f"rank {rank} ({name}) did not finish its rehearsal within {CHILD_S:g} s")
    answers = [got[r] for r, _ in procs if r in got]
    decisions = [g for g in answers if not g.get("own")]  # the same on every rank: what the node acts on
    answer = (decisions or [g for g in answers if g["error"]] or answers)[0]
    return answer["error"], list(answer["lines"])


def _reply(doc: dict[str, Any] | None, rank: int, name: str, code: int) -> dict[str, Any]:
    """A rehearsal rank's decision, from its last line of output (its own process: still bounded)."""
    if doc is None or not isinstance(doc.get("lines"), list) or "error" not in doc:
        return _own(f"rank {rank} ({name}) ended (exit {code}) without a rehearsal decision")
    return {"error": str(doc["error"])[:2000] if doc["error"] else None, "lines": [str(x) for x in doc["lines"]][:64],
            **({"own": True} if doc.get("own") else {})}  # fmt: skip


def main() -> int:
    """One rank of a node-mode rehearsal (``on_node``): its spec on stdin, its decision on stdout."""
    import sys

    from validator.procs import spec_in

    spec: dict[str, Any] = spec_in()
    with contextlib.suppress(ImportError):  # before the thread: a thread importing torch while this one does
        import torch.distributed  # noqa: F401 - sees it half made, and gives up
    done = threading.Event()
    threading.Thread(target=_held, args=(spec["host"], spec["port"], spec["world"], done, bool(spec["master"])),
                     daemon=True).start()  # fmt: skip
    got = decision(spec["host"], spec["port"], spec["rank"], spec["world"], spec["groups"], spec["name"],
                   spec["gpu"], master=spec["master"])  # fmt: skip
    done.set()
    sys.stdout.write(json.dumps(got) + "\n")
    return 0


def _leave(store: Any, hosting: bool, timeout: float) -> None:
    """This rank is done with the store. The store goes with the process that hosts it: that one
    keeps it until every rank that joined is done (read the decision, or looked up who never
    joined), at most ``timeout`` s."""
    with contextlib.suppress(Exception):  # the store is gone: nothing to wait for
        store.add(f"{KEY}done", 1)
        until = time.monotonic() + timeout
        while hosting and store.add(f"{KEY}done", 0) < store.add(f"{KEY}joined", 0) and time.monotonic() < until:
            time.sleep(0.05)


def _held(host: str, port: int, world: int, done: threading.Event, hosting: bool = False) -> None:
    """A rank held in a group (NCCL's init waits forever for a member that stopped) still answers:
    once the decision is out and this rank has not finished HELD_S later, it prints the decision
    (which names who held it) and ends, from this thread."""
    import sys

    try:
        import torch.distributed as dist

        client = dist.TCPStore(host, port, world, False, timeout=datetime.timedelta(seconds=CHILD_S))  # type: ignore[attr-defined]
        client.wait([f"{KEY}decision"])
        decided = client.get(f"{KEY}decision")  # now: rank 0, which holds the store, ends once it has it
    except Exception:  # noqa: BLE001 - no store, no decision: the rank's own answer, or its deadline, stands
        return
    if done.wait(HELD_S):
        return
    _leave(client, hosting, HELD_S * 6)
    sys.stdout.write(decided.decode() + "\n")
    sys.stdout.flush()
    os._exit(0)


def _own(error: str) -> dict[str, Any]:
    """This rank's own failure: no decision reached it (not what every rank acts on)."""
    return {"error": error, "lines": [], "ranks": [], "hosts": [], "own": True}


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
    if fault[:2] == ["hang", kind]:
        time.sleep(3600)  # tests: a rank held here for good, as NCCL's init holds one whose peer stopped
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


def _decide(store: Any, world: int, groups: dict[str, list[list[int]]], quiet: float, work: float) -> None:
    """Rank 0, in a thread: the decision, once every rank has reported, or ``quiet`` seconds after
    the last report came (a rank that died or hangs never writes one), or at the latest ``work`` +
    ``quiet`` seconds after the groups began."""
    with contextlib.suppress(Exception):  # the store is gone: every rank's own wait says so
        store.set(f"{KEY}decision", json.dumps(decide(*_collect(store, world, quiet, work), groups, world)))


def _beat(host: str, port: int, world: int, rank: int, stop: threading.Event) -> None:
    """This rank is alive: a count in the store, BEAT_S apart, on a connection of its own, until ``stop``. A rank
    that died or was stopped (SIGKILL, a crash, SIGSTOP) stops counting: rank 0 need not wait out its quiet period
    for it (``_collect``); one held in a group (NCCL's init) or slow goes on counting."""
    with contextlib.suppress(Exception):  # no store, or it went: the decision does not need this rank's beat
        import torch.distributed as dist

        client = dist.TCPStore(host, port, world, False, timeout=datetime.timedelta(seconds=GROUP_S))  # type: ignore[attr-defined]
        while not stop.wait(BEAT_S):
            client.add(f"{KEY}beat/{rank}", 1)


def _dead(store: Any, world: int, seen: dict[int, tuple[int, float]]) -> bool:
    """Whether every rank without a report has stopped beating (it beat, then not for DEAD_S): it died or was
    stopped, and no quiet period brings its report. ``seen``: each rank's last count and since when."""
    now, missing = time.monotonic(), [r for r in range(world) if not store.check([f"{KEY}{r}"])]
    for r in missing:
        count = store.add(f"{KEY}beat/{r}", 0)
        if seen.get(r, (-1, now))[0] != count:
            seen[r] = (count, now)
    return bool(missing) and all(seen[r][0] > 0 and now - seen[r][1] >= DEAD_S for r in missing)


def _collect(store: Any, world: int, quiet: float, work: float) -> tuple[dict[int, dict[str, Any]], dict[int, Any]]:
    """Every rank's report (see ``_decide``), and for each rank without one the group it last entered,
    where it said so. It stops waiting early once the ranks without one are known dead (``_dead``); a rank
    that never beat (slow to start: torch's import on a busy node) is waited for as before."""
    now = time.monotonic()
    until, last, seen, looked = now + work + quiet, now, 0, now
    beats: dict[int, tuple[int, float]] = {}
    while (n := store.add(f"{KEY}reported", 0)) < world and time.monotonic() < min(
        until, last + quiet + work * (n == 0)
    ):
        if n != seen:
            seen, last = n, time.monotonic()
        if n and time.monotonic() - looked >= 1.0:
            looked = time.monotonic()
            if _dead(store, world, beats):
                break
        time.sleep(0.05)
    out, at = {}, {}
    for r in range(world):
        if store.check([k := f"{KEY}{r}"]):
            out[r] = json.loads(store.get(k))
        elif store.check([f"{KEY}at/{r}"]):
            at[r] = json.loads(store.get(f"{KEY}at/{r}"))
    return out, at


def decide(reports: dict[int, dict[str, Any]], at: dict[int, Any], groups: dict[str, list[list[int]]],
           world: int) -> dict[str, Any]:  # fmt: skip
    """What every rank acts on: {"error": text or None, "lines": [...], "ranks": [...], "hosts":
    [...]} from every rank's report and, for a rank without one, the group it last entered (``at``).
    ranks and hosts: the culprits. A rank that never reported is one, unless it is held in a group
    that a member never reached (that member is the culprit; this one waits for it); a group's
    error is its reporter's, unless a member of that group never reported (the error is the
    absence's echo: a reset connection, a timeout)."""
    host = {r: str(rep.get("host", "?")) for r, rep in reports.items()}
    gone = [r for r in range(world) if r not in reports]
    where: dict[int, tuple[str, list[int]]] = {}
    for r in gone:
        a = at.get(r)
        if isinstance(a, dict) and isinstance(a.get("members"), list):
            where[r] = (str(a.get("kind")), [m for m in a["members"] if isinstance(m, int)])
            host[r] = str(a.get("host", "?"))[:100]
    waits = {r: m for r in where for m in where[r][1] if m != r and m in gone and where.get(m) != where[r]}
    held = set(waits) if len(waits) < len(gone) else set()  # all waiting on each other: all named
    failed, echoes, named, lines = [], [], set(), []
    for r in gone:
        if r in held:
            kind, members = where[r]
            echoes.append(f"rank {r} ({host[r]}) waiting in {kind} group {_ranks(members)} for rank {waits[r]}")
        else:
            named.add(r)
            place = (f"stopped in {where[r][0]} group {_ranks(where[r][1])}" if r in where
                     else "never reached the groups")  # fmt: skip
            failed.append(f"rank {r}{f' ({host[r]})' if r in host else ''}: never reported, {place}")
    for kind in sorted(groups):
        for members in groups[kind]:
            bad = [(r, e) for r in members if r in reports and (e := reports[r]["groups"].get(kind, {}).get("error"))]
            if not bad:
                continue
            absent = [m for m in members if m in gone]
            who = ", ".join(f"rank {r} ({host[r]}): {e}" for r, e in bad[:4])
            if absent:
                echoes.append(f"{kind} group {_ranks(members)} without rank {_ranks(absent)[1:-1]}: {who}")
            else:
                named.update(r for r, _ in bad)
                failed.append(f"{kind} group {_ranks(members)}: {who}")
        slow = _slow(reports, groups, kind, host)
        lines += [f"PRE012 slow in its {kind} groups: {s}" for s in slow]
    done = sum(len(v) for v in groups.values())
    if not failed and not done:
        lines.insert(0, f"groups: none of more than one rank in this layout on {world} ranks: nothing to rehearse")
    elif not failed:
        lines.insert(0, f"groups: {done} groups ({', '.join(f'{k} x{len(v)}' for k, v in sorted(groups.items()))}) "
                        f"rehearsed on {world} ranks")  # fmt: skip
    error = "; ".join(failed[:8]) + (f"; and {len(failed) - 8} more" if len(failed) > 8 else "") if failed else None
    if error and echoes:
        more = f"; and {len(echoes) - 4} more" if len(echoes) > 4 else ""
        error += f" (held up by it: {'; '.join(echoes[:4])}{more})"
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
