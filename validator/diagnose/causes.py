"""Candidate causes from log events, each with the rule that decided the culprit and how sure
it is. ``verdict`` ranks them; here each builder looks at one kind of evidence."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from validator.diagnose import strength as S
from validator.diagnose.classify import fingerprint, ranks_list
from validator.diagnose.events import Cause, Event, Evidence
from validator.targets import fold_ranks


def ev(e: Event) -> Evidence:
    return Evidence(e.source, e.text, e.rank)


def _ranks(rs: Iterable[int | None]) -> list[int]:
    return sorted({r for r in rs if r is not None})


def _who(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) != 1 else ''} {fold_ranks(ranks)}" if ranks else "an unknown rank"


def by_kind(events: list[Event], *kinds: str) -> list[Event]:
    return [e for e in events if e.kind in kinds]


def detail_mismatch(events: list[Event]) -> Cause | None:
    """DETAIL fingerprints: every message names two ranks' fingerprints; vote per rank."""
    seen = by_kind(events, "coll.detail_mismatch", "coll.shape_verify")
    if not seen:
        return None
    fp: dict[int, str] = {}
    for e in seen:
        if e.kind == "coll.detail_mismatch":
            fp.setdefault(int(e.data["a"]), fingerprint(e.data["fa"]))
            if "b" in e.data:
                fp.setdefault(int(e.data["b"]), fingerprint(e.data["fb"]))
    if not fp:
        return Cause("COL001", "ranks called mismatched collectives (shape check)", _ranks(e.rank for e in seen),
                     "low", "older shape verification names only the reporting ranks", [ev(e) for e in seen[:3]], strength=S.PARTIAL)  # fmt: skip
    counts = Counter(fp.values())
    (top, n), *rest = counts.most_common()
    odd = sorted(r for r, f in fp.items() if f != top)
    if len(fp) < 2:
        return Cause("COL001", f"a DETAIL mismatch report (cut short) names {_who(sorted(fp))} running {top}", [], "unknown",
                     "only one side of the DETAIL report is in the log", [ev(e) for e in seen[:3]], strength=S.PARTIAL)  # fmt: skip
    if not odd:  # same op and shapes at different sequence numbers: one side is a collective ahead
        return Cause("COL001", f"ranks {fold_ranks(sorted(fp))} ran {top} at different sequence numbers", [], "unknown",
                     "the DETAIL fingerprints differ only in their sequence numbers: no majority names a side",
                     [ev(e) for e in seen[:3]], strength=S.PARTIAL)  # fmt: skip
    majority = sorted(r for r, f in fp.items() if f == top)
    evidence = [ev(e) for e in sorted(seen, key=lambda e: e.rank not in odd)[:3]]
    if rest and rest[0][1] == n:
        return Cause("COL001", f"ranks disagree on the collective ({'; '.join(f'{_who([r])}: {f}' for r, f in sorted(fp.items()))})",
                     [], "unknown", "the DETAIL fingerprints split evenly: no majority to judge by", evidence, strength=S.PARTIAL)  # fmt: skip
    odd_fp = "; ".join(sorted({fp[r] for r in odd}))
    return Cause(
        "COL001",
        f"{_who(odd)} called {odd_fp} where {_who(majority)} called {top}",
        odd,
        "high" if n >= 2 else "medium",
        f"TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints: {n} of {len(fp)} ranks agree, {_who(odd)} differ (majority vote)",
        evidence,
        expected=top,
        actual=odd_fp,
        strength=S.DETAIL_MAJORITY,
    )


def desync(events: list[Event]) -> Cause | None:
    """Desync report / monitored barrier. "Didn't join" outranks "joined but didn't finish"; a
    report that names every rank it knows names nobody."""
    strong = by_kind(events, "coll.desync_never_joined", "coll.desync_not_joined", "coll.monitored_barrier")
    weak = by_kind(events, "coll.desync_not_finished")
    seen = strong or weak
    if not seen:
        return None
    culprits = _ranks(r for e in seen for r in ranks_list(e.data.get("ranks", "")))
    known = _ranks(e.rank for e in events)
    kinds = {e.kind for e in seen}
    why = "monitored barrier" if kinds == {"coll.monitored_barrier"} else "desync report (TORCH_NCCL_DESYNC_DEBUG)"
    seqs = sorted({int(e.data.get("next", e.data.get("seq", 0))) for e in seen if "seq" in e.data})
    at = f" collective #{seqs[0]}" if seqs else " the collective"
    if not strong and set(known) <= set(culprits):
        return Cause("COL003", f"every rank joined{at} and none finished it (mismatched or hung collective)", [], "unknown",
                     f"the {why} names all ranks, which names nobody", [ev(e) for e in seen[:3]], strength=S.ALL_NAMED)  # fmt: skip
    verb = "never joined" if strong else "joined but never finished"
    return Cause("COL002", f"{_who(culprits)} {verb}{at} that the other ranks entered", culprits, "high" if strong else "medium",
                 f"the {why} names them", [ev(e) for e in seen[:3]], strength=S.DESYNC_NEVER_JOINED if strong else S.DESYNC_NOT_FINISHED,
                 family="missing_rank" if why == "monitored barrier" else "")  # fmt: skip


def _pairs(seen: list[Event]) -> list[int]:
    out = []
    for e in seen:
        out += [int(e.data[k]) for k in ("a", "b") if k in e.data]
        if e.rank is not None:
            out.append(e.rank)
    return _ranks(out)


def _host_of(hosts: list[str], ranks: list[int]) -> str:
    where = f"host {', '.join(hosts[:4])}" if hosts else "the host"
    return where + (f" (reported by {_who(ranks)})" if ranks else "")


def nccl_init(events: list[Event]) -> list[Cause]:
    out = []
    if seen := by_kind(events, "nccl.duplicate_gpu"):
        # NCCL init.cc checks its own rank against every peer, so the reporter is one of the pair; a
        # reporter outside the pair it prints means the ranks are a sub-communicator's, not global
        local = [
            e
            for e in seen
            if e.rank is not None and "a" in e.data and e.rank not in (int(e.data["a"]), int(e.data["b"]))
        ]
        ranks = [] if local else _pairs(seen)
        dev = next((e.data["dev"] for e in seen if "dev" in e.data), None)
        pairs = sorted({f"{e.data['a']} and {e.data['b']}" for e in local})
        what = f"communicator ranks {', '.join(pairs)} (of a sub-communicator)" if local else _who(ranks)
        out.append(Cause("DGN004", f"{what} share one GPU{f' (CUDA device {dev})' if dev else ''}", ranks,
                         "high" if ranks else "unknown",
                         "NCCL names the ranks that share the device" if ranks else "the reporting rank is not in the "
                         "pair NCCL names, so those are communicator-local ranks; the global ones are not in the log",
                         [ev(e) for e in seen[:3]], strength=S.DUPLICATE_GPU))  # fmt: skip
    if seen := by_kind(events, "nccl.version_mismatch"):
        vers: dict[int, str] = {}
        for e in seen:
            vers[int(e.data["a"])], vers[int(e.data["b"])] = e.data["va"], e.data["vb"]
        (top, n), *rest = Counter(vers.values()).most_common()
        if rest and rest[0][1] == n:  # rank A vs rank B and nothing else: no side is the odd one
            out.append(Cause("DGN006", f"ranks run different NCCL versions ({'; '.join(f'rank {r}: {v}' for r, v in sorted(vers.items()))})",
                             [], "unknown", "NCCL compares versions at init; without a majority neither side is the outlier",
                             [ev(e) for e in seen[:3]], strength=S.NCCL_VERSIONS))  # fmt: skip
        else:
            odd = sorted(r for r, v in vers.items() if v != top)
            out.append(Cause("DGN006", f"{_who(odd)} run NCCL {', '.join(sorted({vers[r] for r in odd}))}, the others {top}", odd,
                             "high" if n >= 2 else "medium", "NCCL compares versions at init; the odd version is the outlier",
                             [ev(e) for e in seen[:3]], strength=S.NCCL_VERSIONS))  # fmt: skip
    if seen := by_kind(events, "nccl.no_interface"):
        ranks = _ranks(e.rank for e in seen)
        hosts = sorted({e.ident.host for e in seen if e.ident.host})
        iface = next((e.data["iface"] for e in seen if "iface" in e.data), None)
        what = f"interface {iface} does not exist" if iface else "no usable network interface"
        out.append(Cause("DGN005", f"{what} on {_host_of(hosts, ranks)}", [], "unknown",
                         "a host-level setting (NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME, the host's interfaces): it points "
                         "at the host, not at a faulty rank", [ev(e) for e in seen[:3]], hosts=hosts, strength=S.NO_INTERFACE))  # fmt: skip
    if seen := by_kind(events, "net.addr_in_use"):
        ranks = _ranks(e.rank for e in seen)
        hosts = sorted({e.ident.host for e in seen if e.ident.host})
        port = next((e.data["port"] for e in seen if e.data.get("port")), None)
        out.append(Cause("DGN003", f"port {port or '?'} already in use on {_host_of(hosts, ranks)}", [], "unknown",
                         "the port is taken on the host where the store or the rank binds (another job, a leftover "
                         "process): a host-level conflict, not a faulty rank", [ev(e) for e in seen[:3]], hosts=hosts,
                         strength=S.ADDRESS_IN_USE))  # fmt: skip
    if seen := by_kind(events, "rdzv.env_missing", "nccl.dup_rank", "nccl.nranks_mismatch", "nccl.invalid_rank"):
        ranks = _ranks(e.rank for e in seen)
        out.append(Cause("DGN012", f"launch contract broken on {_who(ranks)}: {seen[0].text[:160]}", ranks, "high",
                         "the ranks report it themselves", [ev(e) for e in seen[:3]], strength=S.LAUNCH_CONTRACT))  # fmt: skip
    return out


_KEY_RANK = re.compile(r"/(\d+)$")


def store(events: list[Event]) -> list[Cause]:
    out: list[Cause] = []
    conn = by_kind(events, "rdzv.connect_timeout", "rdzv.conn_error", "rdzv.connect_failed", "rdzv.store_timeout")
    endpoints = Counter((e.data.get("port")) for e in by_kind(events, "rdzv.store_endpoint") if e.data.get("port"))
    server_up = bool(endpoints) or bool(by_kind(events, "rdzv.clients_joined", "rdzv.wait_keys", "rdzv.store_barrier"))
    if conn:
        ranks = _ranks(e.rank for e in conn)
        target = next(
            (f"{e.data['host']}:{e.data['port']}" for e in conn if "port" in e.data and "host" in e.data), None
        )
        tport = target.rsplit(":", 1)[1] if target else None
        good = endpoints.most_common(1)[0][0] if endpoints else None
        if good and tport and good != tport:
            out.append(Cause("DGN002", f"{_who(ranks)} connect to the store at {target}; the other ranks reached it at port {good}",
                             ranks, "high" if ranks else "medium", "its endpoint differs from the one the other ranks used",
                             [ev(e) for e in conn[:2]], expected=f"port {good}", actual=f"port {tport}", strength=S.STORE_WRONG_PORT))  # fmt: skip
        elif (0 not in ranks and not server_up and {e.kind for e in conn} == {"rdzv.connect_timeout"}
              and not any("/elastic/" in f for e in conn for f in e.stack)):  # fmt: skip
            # TCPStore's server runs in rank 0 (env:// init_process_group: is_master = rank == 0) or in the
            # torchrun agent of node 0: a client that cannot connect waited for that side to come up
            out.append(Cause("DGN002", f"{_who(ranks)} timed out connecting to the store at {target or 'MASTER_ADDR:MASTER_PORT'}, "
                             "which rank 0 (or node 0's torchrun agent) hosts: rank 0 never reached init_process_group "
                             "in time, or the address is wrong", [0], "medium",
                             "the TCPStore server is created by rank 0 (or node 0's agent); the rank that times out "
                             "connecting is the victim", [ev(e) for e in conn[:2]], strength=S.STORE_UNREACHABLE))  # fmt: skip
        else:
            refused = all(e.data.get("errno") == "111" or "refused" in e.text for e in conn)
            out.append(Cause("DGN002", f"{_who(ranks)} could not reach the store at {target or 'MASTER_ADDR:MASTER_PORT'}"
                             + (" (connection refused: nothing listened there)" if refused else ""),
                             [], "low", "the rank timed out connecting; either its address is wrong or the store host "
                             "was not up", [ev(e) for e in conn[:2]],
                             # c10d's per-retry warnings alone also appear in runs that then connect (Windows, macOS)
                             strength=S.PARTIAL if {e.kind for e in conn} == {"rdzv.connect_failed"} else S.STORE_UNREACHABLE,
                             family="connection_refused" if refused else ""))  # fmt: skip
    waits = by_kind(events, "rdzv.wait_keys")
    missing = _ranks(int(m.group(1)) for e in waits for k in re.split(r"[,\s]+", e.data.get("keys", ""))
                     if "/torchelastic/" not in k and (m := _KEY_RANK.search(k)))  # fmt: skip
    joined = by_kind(events, "rdzv.clients_joined", "rdzv.timeout", "rdzv.closed")
    if missing or joined or waits:
        counts = next((f" ({e.data['joined']}/{e.data['expected']} joined)" for e in joined if "joined" in e.data), "")
        evidence = [ev(e) for e in (waits + joined)[:3]]
        family = "missing_rank" if counts or waits else "rendezvous_timeout"
        if missing:
            out.append(Cause("DGN001", f"{_who(missing)} never joined the process group{counts}", missing, "high",
                             "the store keys the others waited for belong to them (last number of the key)", evidence,
                             strength=S.NEVER_JOINED, family="missing_rank"))  # fmt: skip
        else:
            out.append(Cause("DGN001", f"ranks or nodes never joined the rendezvous{counts}", [], "unknown",
                             "the store only counts who arrived; nothing names who did not", evidence, strength=S.RDZV_COUNT,
                             family=family))  # fmt: skip
    return out


ORIGIN_CODE = {
    "py.exception": "DGN010",
    "cuda.error": "DGN008",
    "cuda.oom": "DGN009",
    "host.oom": "DGN009",
    "proc.crash": "DGN011",
}


def stopped(events: list[Event]) -> Cause | None:
    """The scheduler or an outer timeout ended the job (maybe while it hung)."""
    seen = by_kind(events, "agent.death_signal", "slurm.cancelled")
    if not seen:
        return None
    why = next((e.data["why"].strip().lower() for e in seen if e.data.get("why")), None)
    return Cause("DGN014", f"the job was stopped from outside{' (' + why + ')' if why else ''}: {seen[0].text[:160]}", [],
                 "medium", "the launcher or scheduler received a stop signal; no rank reported an error before it",
                 [ev(e) for e in seen[:3]], strength=S.STOPPED_OUTSIDE)  # fmt: skip


def origins(events: list[Event], symptoms_by_rank: dict[int, list[Event]]) -> Cause | None:
    """Ranks that failed on their own (exception, CUDA error, OOM) before the others timed out."""
    seen = [e for e in events if e.kind in ORIGIN_CODE]
    if not seen:
        return None
    ranked = [e for e in seen if e.rank is not None]
    per: dict[int, list[Event]] = defaultdict(list)
    for e in ranked:
        per[int(e.rank)].append(e)  # type: ignore[arg-type]
    pool = ranked or seen
    first = min(pool, key=lambda e: (e.time is None, e.time or 0.0))
    code = ORIGIN_CODE[first.kind]
    msg = first.text[:200]
    stack = first.stack
    if len(per) <= 1:
        culprits = sorted(per)
        # victims: ranks that only timed out or lost a peer, or that torchrun stopped (SIGTERM) after it
        stopped = [e.data.get("rank") for e in by_kind(events, "summary.failure") if e.data.get("signal") == "SIGTERM"]
        others = [r for r in [*symptoms_by_rank, *stopped] if isinstance(r, int) and r not in per]
        # alone in the log, it is only the first visible failure: nothing shows the others waited for it
        conf = "high" if culprits and others else "low"
        reason = (
            "the only rank that failed on its own; the others only report timeouts or lost peers, or were stopped"
            if others
            else "the only rank with an error of its own in these lines; no other rank shows it waited for this one"
        )
    else:
        texts = {e.data.get("msg") or e.text for e in ranked}
        timed = [e for e in ranked if e.time is not None]
        if len(texts) == 1 and len(per) > 2:
            # a bug (or a shortage) on every rank, not a divergence: no rank is the one that started it
            culprits, conf, reason = [], "unknown", f"ranks {fold_ranks(sorted(per))} all raised the same error"
        elif timed:
            first = min(timed, key=lambda e: e.time or 0.0)
            code, msg, stack = ORIGIN_CODE[first.kind], first.text[:200], first.stack
            tied = sorted({int(e.rank) for e in timed if e.time == first.time})  # type: ignore[arg-type]
            if len(tied) > 1:  # same stamp (often whole seconds): the log does not say which came first
                culprits, conf = tied, "low"
                reason = f"ranks {fold_ranks(tied)} raised errors of their own at the same time stamp"
            else:
                culprits, conf = [int(first.rank)], "medium"  # type: ignore[arg-type]
                reason = f"the earliest of {len(per)} ranks with errors of their own (by timestamp)"
        else:
            culprits, conf, reason = (
                sorted(per),
                "low",
                "several ranks failed on their own and nothing orders them in time",
            )
    site = f" at {stack[-1].split(' in ')[0]}" if stack else ""
    head = (
        f"{_who(culprits)} failed first" if culprits or len(per) <= 1 else f"ranks {fold_ranks(sorted(per))} all failed"
    )
    return Cause(code, f"{head}: {msg}{site}", culprits, conf, reason,
                 [ev(e) for e in sorted(pool, key=lambda e: e.rank not in culprits)[:3]], stack=stack, time=first.time,
                 strength=S.EXCEPTION[conf])  # fmt: skip


def uniqueid(events: list[Event]) -> Cause | None:
    """Ranks waiting for the NCCL unique id of a root that never published it."""
    seen = by_kind(events, "nccl.uniqueid_wait")
    roots = Counter(int(e.data["root"]) for e in seen)
    if not roots:
        return None
    root = roots.most_common(1)[0][0]
    waiting = _ranks(int(e.data["rank"]) for e in seen)
    return Cause("COL002", f"rank {root} never published its NCCL unique id; {_who(waiting)} waited for it", [root], "low",
                 "the ranks setting up the communicator waited for this rank's store key (it may have failed elsewhere or "
                 "be slow to reach the collective)", [ev(e) for e in seen[:3]], strength=S.UNIQUE_ID,
                 family="rendezvous_timeout")  # fmt: skip


def watchdog(events: list[Event], world: list[int]) -> list[Cause]:
    """NCCL watchdog timeouts: a different op at the same sequence number, or silent ranks."""
    out: list[Cause] = []
    seen = by_kind(events, "coll.watchdog_timeout")
    if not seen:
        return out
    at: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for e in seen:
        if e.rank is not None and "seq" in e.data:
            at[(e.data.get("pg", "?"), e.data["seq"])].setdefault(e.rank, e.data.get("op", "?"))
    for (_pg, seq), ops in at.items():
        counts = Counter(ops.values()).most_common()
        if len(counts) > 1 and counts[0][1] == counts[1][1]:
            parts = "; ".join(f"rank {r}: {o}" for r, o in sorted(ops.items()))
            out.append(Cause("COL001", f"ranks ran different collectives as #{seq} ({parts})", [], "unknown",
                             "the watchdog reports different OpTypes at one sequence number and no majority",
                             [ev(e) for e in seen[:3]], strength=S.NO_MAJORITY))  # fmt: skip
        if len(counts) > 1 and counts[0][1] > counts[1][1]:
            odd = sorted(r for r, o in ops.items() if o != counts[0][0])
            out.append(Cause("COL001", f"{_who(odd)} timed out in {ops[odd[0]]} #{seq} where {counts[0][1]} ranks ran {counts[0][0]}",
                             odd, "medium", "the watchdog reports a different OpType at the same sequence number (majority vote)",
                             [ev(e) for e in seen if e.rank in odd][:3], strength=S.TIMED_OUT_ELSEWHERE))  # fmt: skip
    reporting = _ranks(e.rank for e in seen)
    silent = [r for r in world if r not in reporting]
    if reporting and silent and len(silent) * 2 < len(world):
        seqs = sorted({e.data["seq"] for e in seen if "seq" in e.data}, key=int)
        out.append(Cause("COL002", f"{_who(silent)} did not report the timeout of collective #{seqs[0] if seqs else '?'} that {_who(reporting)} waited in",
                         silent, "medium", "every other rank with a log timed out in the collective; these ranks never reached it",
                         [ev(seen[0])], strength=S.SILENT_IN_TIMEOUT))  # fmt: skip
    return out
