"""Candidate causes for the message families of ``families``: NCCL network/system errors by
return-code class, gloo connect failures (and the self-address trap), NCCL's "at and around
rank N" pointer, store-based barriers, NCCL RAS, and the "unrecognised failure" fallback.

Attribution rules (issue 11): the rank that reports a timeout or waits on the store or a peer
is a victim; NCCL's "at and around rank N" and RAS communicator ranks are pointers, not
initiators; a peer address is where the reporter tried to go, not a proven culprit.
"""

from __future__ import annotations

from collections import defaultdict

from validator.diagnose import strength as S
from validator.diagnose.causes import _who, by_kind, ev
from validator.diagnose.events import Cause, Event, Role
from validator.diagnose.families import INFO_KINDS, LOOPBACK, nccl_class, nccl_vocab

NCCL_KINDS = ("nccl.error", "nccl.result", "nccl.last_error", "nccl.ib_error", "nccl.peer_closed", "nccl.peer_io",
              "nccl.connect_failed", "nccl.proxy_failed", "nccl.proxy_closed", "nccl.syscall_failed", "nccl.warn",
              "coll.watchdog_exception", "coll.async_error")  # fmt: skip
NETWORK_KINDS = ("gloo.peer_closed", "gloo.connect_refused", "gloo.connect_mesh", "net.conn_refused")


def mismatch_pointer(events: list[Event]) -> Cause | None:
    """NCCL <= 2.7 init.cc: "Mismatched collective detected ... at and around rank N": the class
    is certain, the rank is where NCCL's ring noticed it (low confidence, never the initiator)."""
    seen = by_kind(events, "nccl.mismatch_around")
    if not seen:
        return None
    around = sorted({int(e.data["around"]) for e in seen})
    where = ", ".join(str(r) for r in around)
    return Cause("COL001", f"NCCL detected mismatched collectives; it points at and around rank {where} "
                 "(a pointer into the ring, not the rank that diverged)", [], "low",
                 "NCCL's own mismatch check names only the neighbourhood where it noticed the mismatch; rerun with "
                 "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL to see every rank's collectives", [ev(e) for e in seen[:3]],
                 strength=S.NCCL_MISMATCH_AROUND)  # fmt: skip


def size_mismatch(events: list[Event]) -> Cause | None:
    """NCCL's IB or socket transport: the sender and receiver of one transfer disagree on its size."""
    seen = by_kind(events, "nccl.size_mismatch")
    if not seen:
        return None
    e = seen[0]
    peer = f" with peer {e.data['peer']}" if e.data.get("peer") else ""
    return Cause("COL001", f"NCCL found a collective size mismatch{peer}: local size "
                 f"{e.data['local']}, remote size {e.data['remote']} (ranks called collectives of different sizes or counts)",
                 [], "unknown", "the transfer's two ends disagree; which rank diverged is not in the message",
                 [ev(x) for x in seen[:3]], expected=f"size {e.data['remote']}", actual=f"size {e.data['local']}",
                 strength=S.NCCL_SIZE_MISMATCH)  # fmt: skip


def monitored_peer(events: list[Event]) -> Cause | None:
    """monitoredBarrier on a rank other than 0: it reached the barrier and defers to rank 0's log."""
    seen = by_kind(events, "coll.monitored_peer")
    if not seen:
        return None
    return Cause("COL002", f"{_who(sorted({e.rank for e in seen if e.rank is not None}))} reached the monitored barrier but "
                 "could not hear from rank 0; rank 0's log names the ranks that never arrived", [], "unknown",
                 "PyTorch's monitored barrier reports the faulty ranks only on rank 0; this log is a reporter's",
                 [ev(e) for e in seen[:3]], strength=S.MONITORED_BARRIER, family="missing_rank")  # fmt: skip


def store_barrier(events: list[Event]) -> Cause | None:
    """distributed_c10d._store_based_barrier: worker_count of world_size arrived. Fewer: ranks
    never reached the group creation (which ones the store does not say); more: two jobs or a
    duplicate launch share one store and key."""
    seen = by_kind(events, "rdzv.store_barrier")
    if not seen:
        return None
    last = max(seen, key=lambda e: (int(e.data["count"]) > int(e.data["world"]), e.time or 0.0))
    world, count = int(last.data["world"]), int(last.data["count"])
    reporters = sorted({int(e.data["reporter"]) for e in seen})
    evidence = [ev(e) for e in seen[:3]]
    who = f"reported by rank{'s' if len(reporters) > 1 else ''} {', '.join(map(str, reporters[:8]))}"
    if count > world:
        return Cause("DGN001", f"{count} workers checked into a store barrier for a group of {world} ({last.data['key']}): "
                     "two jobs or a duplicate launch share one store (MASTER_ADDR:MASTER_PORT)", [], "unknown",
                     "more workers than the world size arrived: nobody is missing, the store is shared", evidence,
                     expected=f"{world} workers", actual=f"{count} workers", strength=S.STORE_BARRIER_COUNT,
                     family="rendezvous_timeout")  # fmt: skip
    # the default group's barrier (key ...:1) counts global ranks 0..world-1: when every arrival
    # reported, the missing ranks are the rest (by elimination)
    arrived = {int(e.data["reporter"]) for e in seen if e.data["key"] == last.data["key"]}
    if last.data["key"].endswith(":1") and len(arrived) == count and arrived <= set(range(world)):
        missing = sorted(set(range(world)) - arrived)
        return Cause("DGN001", f"{_who(missing)} never reached the store-based barrier of the default group: the {count} "
                     f"of {world} ranks that did all reported ({who})", missing, "high" if len(missing) == 1 else "medium",
                     "by elimination: every rank that arrived printed its rank, the barrier counts global ranks "
                     f"0-{world - 1}", evidence, expected=f"{world} ranks", actual=f"{count} ranks", strength=S.STORE_BARRIER_MISSING,
                     family="missing_rank")  # fmt: skip
    return Cause("DGN001", f"only {count} of {world} ranks reached the store-based barrier for {last.data['key']} "
                 f"({who}); the missing ranks are not named", [], "unknown",
                 "the store counts arrivals; the reporting ranks are the ones that did arrive", evidence,
                 expected=f"{world} ranks", actual=f"{count} ranks", strength=S.STORE_BARRIER_COUNT, family="missing_rank")  # fmt: skip


def network(events: list[Event]) -> list[Cause]:
    """NCCL errors by ncclResult_t class, gloo connects refused; nobody named (they echo a peer)."""
    out: list[Cause] = []
    # a pair its peer closed while other ranks report collective timeouts: the peer exited after its own
    # timeout, so the timeout is the failure and the lost pair its echo (a refused connect never is one)
    timed_out = bool(by_kind(events, "coll.gloo_timeout", "coll.watchdog_timeout", "coll.blocking_wait"))
    refused = [e for e in by_kind(events, *NETWORK_KINDS) if not (timed_out and e.kind == "gloo.peer_closed")]
    if refused:
        peers = sorted({f"{e.data['peer']}:{e.data['port']}" for e in refused if "peer" in e.data})
        # a loopback peer is a misadvertised address only where a connect failed: a closed pair had connected
        dialled = {
            f"{e.data['peer']}:{e.data['port']}" for e in refused if "peer" in e.data and e.kind != "gloo.peer_closed"
        }
        loop = sorted({p for p in dialled if LOOPBACK.match(p.rsplit(":", 1)[0])})
        note = (f"; {', '.join(loop)} is a loopback address: a peer advertised its own hostname's loopback alias "
                "(/etc/hosts maps it to 127.0.1.1), set GLOO_SOCKET_IFNAME / fix the hosts file") if loop else ""  # fmt: skip
        target = f" to {', '.join(peers[:3])}" if peers else ""
        what = "connection refused" if any("refused" in e.text for e in refused) else "connection to a peer lost"
        out.append(Cause("DGN007", f"{what}{target}{note}", [], "unknown",
                         "nothing listened where the rank connected, or the peer closed the pair: the peer had exited, "
                         "was not up yet, or advertised an address others cannot reach", [ev(e) for e in refused[:3]], strength=S.CONNECTION_REFUSED,
                         family="connection_refused"))  # fmt: skip
    nccl = [e for e in by_kind(events, *NCCL_KINDS) if "cuda" not in str(e.data.get("what", "")).lower()]
    classes = [c for e in nccl if (c := nccl_class(e.kind, e.data, e.text))]
    hard = [e for e in nccl if e.kind != "nccl.warn" or nccl_class(e.kind, e.data, e.text)]
    if hard and (classes or not refused):
        family = nccl_vocab(classes)
        first = sorted(hard, key=lambda e: (nccl_class(e.kind, e.data, e.text) is None, e.time or 0.0))[0]
        ranks = sorted({e.rank for e in hard if e.rank is not None})
        peers = sorted({str(e.data["peer"]) for e in hard if "peer" in e.data})
        extra = f"; peer{'s' if len(peers) > 1 else ''} named: {', '.join(peers[:4])}" if peers else ""
        label = {"nccl_remote_error": "remote peer or network failure", "nccl_system_error": "system/socket failure"}
        out.append(Cause("DGN007", f"NCCL {label[family]} on {_who(ranks)}: {first.text[:160]}{extra}", [], "unknown",
                         "NCCL errors on many ranks are usually the echo of one peer's failure; none failed first in "
                         "these logs", [ev(first), *[ev(e) for e in hard if e is not first][:2]], strength=S.NCCL_NET_ERROR,
                         family=family))  # fmt: skip
    return out


def ras(events: list[Event]) -> Cause | None:
    """NCCL RAS (2.24+) status: ranks whose communicator data is missing or processes considered
    dead (missing_rank), or ranks whose operation counts differ (MISMATCH: a hang, not a crash).
    Its ranks are communicator ranks: pointers with their nodes, never named as global ranks."""
    seen = by_kind(events, "nccl.ras_missing")
    if not seen:
        return None
    mismatch = [e for e in seen if "MISMATCH" in str(e.data.get("section", ""))]
    pick = [e for e in seen if e not in mismatch] or mismatch
    nodes = sorted({str(e.data["node"]) for e in pick if "node" in e.data})
    ranks = sorted({int(e.data["comm_rank"]) for e in pick if "comm_rank" in e.data})
    what = (
        f"communicator rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks[:16]))}" if ranks else "processes"
    )
    where = f" on node{'s' if len(nodes) != 1 else ''} {', '.join(nodes[:8])}" if nodes else ""
    if pick is mismatch:
        return Cause("COL003", f"NCCL RAS: {what}{where} are at a different operation count than the rest of their "
                     "communicator (a hang in a collective)", [], "unknown",
                     "RAS compares operation counts; the odd ranks may be ahead or behind, the report does not say who "
                     "stopped", [ev(e) for e in pick[:3]], hosts=nodes[:8], strength=S.NCCL_RAS)  # fmt: skip
    return Cause("COL002", f"NCCL RAS reports {what} missing or unresponsive{where}", [], "low",
                 "RAS lists communicator ranks (not global ranks) that did not answer; their nodes are the suspects",
                 [ev(e) for e in pick[:3]], hosts=nodes[:8], strength=S.NCCL_RAS, family="missing_rank")  # fmt: skip


def horovod(events: list[Event]) -> Cause | None:
    """Horovod's stall inspector names the ranks that have not submitted a tensor (the initiators,
    like a monitored barrier); with only "ready ranks", disjoint ready sets mean different ranks
    submitted different collectives."""
    seen = by_kind(events, "hvd.stall", "hvd.missing_block")
    if not seen:
        return None
    sets = {x for e in seen for x in str(e.data.get("sets", "")).split("|") if x}
    missing = {
        int(r) for e in seen if e.kind == "hvd.missing_block" for r in str(e.data.get("ranks", "")).split(",") if r
    }
    missing |= {int(r) for x in sets if x.startswith("missing:") for r in x[8:].split(",") if r}
    evidence = [ev(e) for e in seen[:3]]
    if missing:
        culprits = sorted(missing)
        return Cause("COL002", f"{_who(culprits)} never submitted the tensors the other ranks wait for (Horovod stall "
                     "inspector)", culprits, "high", "Horovod's stall inspector names the missing ranks", evidence,
                     strength=S.HOROVOD_STALL, family="missing_rank")  # fmt: skip
    ready = sorted({x[6:] for x in sets if x.startswith("ready:")})
    groups = [set(r.split(",")) for r in ready]
    if len(groups) > 1 and any(not (a & b) for a in groups for b in groups if a is not b):
        return Cause("COL001", f"different ranks wait on different tensors (ready ranks {'; '.join(ready[:4])}): they "
                     "submitted different collectives", [], "unknown",
                     "disjoint ready sets in Horovod's stall report: no side is the majority by itself", evidence,
                     strength=S.HOROVOD_READY)  # fmt: skip
    return Cause("COL002", f"only ranks {'; '.join(ready[:2]) or '?'} submitted the stalled tensors; the others have not "
                 "(the world size is not in these lines)", [], "unknown",
                 "Horovod lists the ready ranks; the missing ones follow only with the world size", evidence, strength=S.HOROVOD_READY,
                 family="missing_rank")  # fmt: skip


def versions(events: list[Event]) -> Cause | None:
    """NCCL version banners that differ within one log (nodes run different NCCL builds)."""
    seen = by_kind(events, "misc.nccl_version")
    found = sorted({str(e.data["version"]) for e in seen if "version" in e.data})
    if len(found) < 2:
        return None
    first = [next(e for e in seen if e.data.get("version") == v) for v in found]
    return Cause("DGN006", f"the log shows NCCL versions {', '.join(found)}: nodes run different NCCL builds", [], "unknown",
                 "NCCL's version banners differ between processes of the job", [ev(e) for e in first[:3]],
                 strength=S.NCCL_VERSIONS_IN_LOG)  # fmt: skip


def unrecognised(events: list[Event]) -> Cause | None:
    """No family fits: quote the first error lines in time per rank (or per file without ranks)."""
    seen = [e for e in events if e.role != Role.FACT and e.kind not in INFO_KINDS]
    if not seen:
        return None
    per: dict[object, list[Event]] = defaultdict(list)
    for e in sorted(seen, key=lambda e: (e.time is None, e.time or 0.0)):
        per[e.rank if e.rank is not None else e.file].append(e)
    groups = sorted(per.values(), key=lambda g: (g[0].time is None, g[0].time or 0.0))[:6]
    lines = [ev(e) for g in groups for e in g[:2]]
    first = "; ".join(
        f"{g[0].source}: {'rank ' + str(g[0].rank) + ': ' if g[0].rank is not None else ''}{g[0].text[:120]}"
        for g in groups[:4]
    )
    return Cause("DGN013", f"errors that match no known failure family; first error lines: {first}", [], "unknown",
                 "no recognised family; these are the earliest error lines of each rank (see `validator explain DGN013` "
                 "to share the log for a new rule)", lines[:8], strength=S.UNRECOGNISED)  # fmt: skip
