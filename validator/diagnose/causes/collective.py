"""Rules over what the ranks report about a collective: DETAIL fingerprints, the desync report, the
monitored barrier, NCCL's unique id, NCCL's own mismatch checks, Horovod's stall inspector, the NCCL
watchdog."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence, by_kind, quote, ranks_of, who
from validator.diagnose.classify import fingerprint, ranks_list
from validator.diagnose.events import Cause, Event
from validator.targets import fold_ranks


def detail_mismatch(ev: Evidence) -> list[Cause]:
    """DETAIL fingerprints: every message names two ranks' fingerprints; vote per rank."""
    events = ev.events
    seen = by_kind(events, "coll.detail_mismatch", "coll.shape_verify")
    if not seen:
        models = by_kind(events, "coll.model_mismatch")
        return (
            [
                Cause(
                    code="COL001",
                    summary="DDP found a different model on two ranks (its parameter count or shapes differ)",
                    culprits=[],
                    confidence="unknown",
                    reason="DDP's check compares one rank's model with another's: which of them built the wrong one, "
                    "the message cannot tell",
                    evidence=[quote(e) for e in models[:3]],
                    strength=S.PARTIAL,
                )
            ]
            if models
            else []
        )
    fp: dict[int, str] = {}
    for e in seen:
        if e.kind == "coll.detail_mismatch" and "a" in e.data:
            fp.setdefault(int(e.data["a"]), fingerprint(e.data["fa"]))
            if "b" in e.data:
                fp.setdefault(int(e.data["b"]), fingerprint(e.data["fb"]))
    if not fp and all(e.kind == "coll.detail_mismatch" for e in seen):  # headers whose ranks are not on their line
        reporters = ranks_of(int(e.data["reporter"]) for e in seen if "reporter" in e.data)
        return [
            Cause(
                code="COL001",
                summary="ranks called mismatched collectives ("
                + (
                    f"{who(reporters)} found its call inconsistent with the others'"
                    if reporters
                    else "a DETAIL report whose ranks are not on its line"
                )
                + ")",
                culprits=[],
                confidence="unknown",
                reason="torch 1.x's DETAIL report names only the rank that found the difference, not whose call differs"
                if reporters
                else "the report's fingerprints are wrapped off or cut from its line",
                evidence=[quote(e) for e in seen[:3]],
                strength=S.PARTIAL,
            )
        ]
    if not fp:
        return [
            Cause(
                code="COL001",
                summary="ranks called mismatched collectives (shape check)",
                culprits=ranks_of(e.rank for e in seen if e.kind == "coll.shape_verify"),
                confidence="low",
                reason="older shape verification names only the reporting ranks",
                evidence=[quote(e) for e in seen[:3]],
                strength=S.PARTIAL,
            )
        ]
    counts = Counter(fp.values())
    (top, n), *rest = counts.most_common()
    odd = sorted(r for r, f in fp.items() if f != top)
    if len(fp) < 2:
        return [
            Cause(
                code="COL001",
                summary=f"a DETAIL mismatch report (cut short) names {who(sorted(fp))} running {top}",
                culprits=[],
                confidence="unknown",
                reason="only one side of the DETAIL report is in the log",
                evidence=[quote(e) for e in seen[:3]],
                strength=S.PARTIAL,
            )
        ]
    if not odd:  # same op and shapes at different sequence numbers: one side is a collective ahead
        return [
            Cause(
                code="COL001",
                summary=f"ranks {fold_ranks(sorted(fp))} ran {top} at different sequence numbers",
                culprits=[],
                confidence="unknown",
                reason="the DETAIL fingerprints differ only in their sequence numbers: no majority names a side",
                evidence=[quote(e) for e in seen[:3]],
                strength=S.PARTIAL,
            )
        ]
    majority = sorted(r for r, f in fp.items() if f == top)
    evidence = [quote(e) for e in sorted(seen, key=lambda e: e.rank not in odd)[:3]]
    if rest and rest[0][1] == n:
        return [
            Cause(
                code="COL001",
                summary=f"ranks disagree on the collective ({'; '.join(f'{who([r])}: {f}' for r, f in sorted(fp.items()))})",
                culprits=[],
                confidence="unknown",
                reason="the DETAIL fingerprints split evenly: no majority to judge by",
                evidence=evidence,
                strength=S.PARTIAL,
            )
        ]
    odd_fp = "; ".join(sorted({fp[r] for r in odd}))
    return [
        Cause(
            code="COL001",
            summary=f"{who(odd)} called {odd_fp} where {who(majority)} called {top}",
            culprits=odd,
            confidence="high" if n >= 2 else "medium",
            reason=f"TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints: {n} of {len(fp)} ranks agree, {who(odd)} differ (majority vote)",
            evidence=evidence,
            expected=top,
            actual=odd_fp,
            strength=S.DETAIL_MAJORITY,
        )
    ]


def desync(ev: Evidence) -> list[Cause]:
    """Desync report / monitored barrier. "Didn't join" outranks "joined but didn't finish"; a
    report that names every rank it knows names nobody."""
    events = ev.events
    strong = by_kind(events, "coll.desync_never_joined", "coll.desync_not_joined", "coll.monitored_barrier")
    weak = by_kind(events, "coll.desync_not_finished")
    seen = strong or weak
    if not seen:
        return []
    culprits = ranks_of(r for e in seen for r in ranks_list(e.data.get("ranks", "")))
    known = ranks_of(e.rank for e in events)
    kinds = {e.kind for e in seen}
    why = "monitored barrier" if kinds == {"coll.monitored_barrier"} else "desync report (TORCH_NCCL_DESYNC_DEBUG)"
    seqs = sorted({int(e.data.get("next", e.data.get("seq", 0))) for e in seen if "seq" in e.data})
    at = f" collective #{seqs[0]}" if seqs else " the collective"
    if not strong and set(known) <= set(culprits):
        return [
            Cause(
                code="COL003",
                summary=f"every rank joined{at} and none finished it (mismatched or hung collective)",
                culprits=[],
                confidence="unknown",
                reason=f"the {why} names all ranks, which names nobody",
                evidence=[quote(e) for e in seen[:3]],
                strength=S.ALL_NAMED,
            )
        ]
    verb = "never joined" if strong else "joined but never finished"
    return [
        Cause(
            code="COL002",
            summary=f"{who(culprits)} {verb}{at} that the other ranks entered",
            culprits=culprits,
            confidence="high" if strong else "medium",
            reason=f"the {why} names them",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.DESYNC_NEVER_JOINED if strong else S.DESYNC_NOT_FINISHED,
            family="missing_rank" if why == "monitored barrier" else "",
        )
    ]


_P2P_KEY = re.compile(r"^(\d+):\d+$")  # ProcessGroupNCCL getKeySendRecv: "lowRank:highRank"
_STORE_GONE = re.compile(r"(?i)reset by peer|broken pipe|closed|refused")


def _writer(e: Event) -> int:
    """The rank that sets the ncclUniqueId key (broadcastUniqueNCCLID): the group's rank 0 for a collective's
    counter key, the pair's lower rank (p2pRank 0) for a single send/recv's "low:high" key."""
    m = _P2P_KEY.match(str(e.data.get("key", "")))
    return int(m.group(1)) if m else int(e.data["root"])


def uniqueid(ev: Evidence) -> list[Cause]:
    """Ranks waiting for the NCCL unique id of the rank whose store key never appeared: that rank, by the key
    scheme; never the store's host when the store itself went away (a reset, a closed connection)."""
    events = ev.events
    seen = by_kind(events, "nccl.uniqueid_wait")
    if not seen:
        return []
    root = Counter(_writer(e) for e in seen).most_common(1)[0][0]
    waiting = ranks_of(int(e.data["rank"]) for e in seen)
    gone = [e for e in seen if _STORE_GONE.search(str(e.data.get("what", "")))]
    if gone:
        return [
            Cause(
                code="DGN002",
                summary=f"{who(waiting)} lost the store while fetching the NCCL unique id: {gone[0].text[:160]}",
                culprits=[],
                confidence="unknown",
                reason="the store connection itself failed (not a key that never appeared): its host went away or the "
                "network dropped it",
                evidence=[quote(e) for e in gone[:3]],
                strength=S.UNIQUE_ID,
                # a connection reset, closed or refused under the request, as gloo's pair resets are: no wait ran out
                family="connection_refused",
            )
        ]
    return [
        Cause(
            code="COL002",
            summary=f"rank {root} never published its NCCL unique id; {who(waiting)} waited for it",
            culprits=[root],
            confidence="low",
            reason="the key the ranks setting up the communicator waited for is this rank's (ProcessGroupNCCL's key "
            "scheme: the group's rank 0, or a pair's lower rank); it may have failed elsewhere or be slow to reach the "
            "collective, and the ranks are the group's",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.UNIQUE_ID,
            family="rendezvous_timeout",
        )
    ]


def mismatch_pointer(ev: Evidence) -> list[Cause]:
    """NCCL <= 2.7 init.cc: "Mismatched collective detected ... at and around rank N": the class
    is certain, the rank is where NCCL's ring noticed it (low confidence, never the initiator)."""
    events = ev.events
    seen = by_kind(events, "nccl.mismatch_around")
    if not seen:
        return []
    around = sorted({int(e.data["around"]) for e in seen})
    where = ", ".join(str(r) for r in around)
    return [
        Cause(
            code="COL001",
            summary=f"NCCL detected mismatched collectives; it points at and around rank {where} "
            "(a pointer into the ring, not the rank that diverged)",
            culprits=[],
            confidence="low",
            reason="NCCL's own mismatch check names only the neighbourhood where it noticed the mismatch; rerun with "
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL to see every rank's collectives",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.NCCL_MISMATCH_AROUND,
        )
    ]


def horovod(ev: Evidence) -> list[Cause]:
    """Horovod's stall inspector names the ranks that have not submitted a tensor (the initiators,
    like a monitored barrier); with only "ready ranks", disjoint ready sets mean different ranks
    submitted different collectives."""
    events = ev.events
    seen = by_kind(events, "hvd.stall", "hvd.missing_block")
    if not seen:
        down = by_kind(events, "hvd.shut_down")
        return (
            [
                Cause(
                    code="DGN010",
                    summary="Horovod was shut down by an exception on another rank (or a rank that finished early); "
                    "that error is not in these lines",
                    culprits=[],
                    confidence="unknown",
                    reason="Horovod's shutdown error is every surviving rank's report of another rank's failure",
                    evidence=[quote(e) for e in down[:3]],
                    strength=S.EXIT_CODE_ONLY,
                    family="child_failed_other",
                )
            ]
            if down
            else []
        )
    sets = {x for e in seen for x in str(e.data.get("sets", "")).split("|") if x}
    missing = {
        int(r) for e in seen if e.kind == "hvd.missing_block" for r in str(e.data.get("ranks", "")).split(",") if r
    }
    missing |= {int(r) for x in sets if x.startswith("missing:") for r in x[8:].split(",") if r}
    evidence = [quote(e) for e in seen[:3]]
    if missing and any(e.data.get("split") for e in seen):
        listed = sorted(missing)
        return [
            Cause(
                code="COL002",
                summary=f"{who(listed)} each miss tensors the others submitted (Horovod stall inspector): they wait "
                "on each other in different collectives, none of them is simply behind",
                culprits=[],
                confidence="unknown",
                reason="the stall inspector's missing ranks miss tensors that have none in common",
                evidence=evidence,
                strength=S.HOROVOD_STALL,
                family="missing_rank",
            )
        ]
    if missing:
        culprits = sorted(missing)
        return [
            Cause(
                code="COL002",
                summary=f"{who(culprits)} never submitted the tensors the other ranks wait for (Horovod stall "
                "inspector)",
                culprits=culprits,
                confidence="high",
                reason="Horovod's stall inspector names the missing ranks",
                evidence=evidence,
                strength=S.HOROVOD_STALL,
                family="missing_rank",
            )
        ]
    ready = sorted({x[6:] for x in sets if x.startswith("ready:")})
    groups = [set(r.split(",")) for r in ready]
    if len(groups) > 1 and any(not (a & b) for a in groups for b in groups if a is not b):
        return [
            Cause(
                code="COL001",
                summary=f"different ranks wait on different tensors (ready ranks {'; '.join(ready[:4])}): they "
                "submitted different collectives",
                culprits=[],
                confidence="unknown",
                reason="disjoint ready sets in Horovod's stall report: no side is the majority by itself",
                evidence=evidence,
                strength=S.HOROVOD_READY,
            )
        ]
    return [
        Cause(
            code="COL002",
            summary=f"only ranks {'; '.join(ready[:2]) or '?'} submitted the stalled tensors; the others have not "
            "(the world size is not in these lines)",
            culprits=[],
            confidence="unknown",
            reason="Horovod lists the ready ranks; the missing ones follow only with the world size",
            evidence=evidence,
            strength=S.HOROVOD_READY,
            family="missing_rank",
        )
    ]


def size_mismatch(ev: Evidence) -> list[Cause]:
    """NCCL's IB or socket transport: the sender and receiver of one transfer disagree on its size."""
    events = ev.events
    seen = by_kind(events, "nccl.size_mismatch")
    if not seen:
        return []
    e = next((x for x in seen if "local" in x.data), seen[0])  # a wrapped line's sizes are on the next line
    peer = f" with peer {e.data['peer']}" if e.data.get("peer") else ""
    sizes = f": local size {e.data['local']}, remote size {e.data['remote']}" if "local" in e.data else ""
    return [
        Cause(
            code="COL001",
            summary=f"{'gloo' if 'gloo' in e.data else 'NCCL'} found a collective size mismatch{peer}{sizes} (ranks "
            "called collectives of different sizes or counts)",
            culprits=[],
            confidence="unknown",
            reason="the transfer's two ends disagree; which rank diverged is not in the message",
            evidence=[quote(x) for x in seen[:3]],
            expected=f"size {e.data['remote']}" if sizes else None,
            actual=f"size {e.data['local']}" if sizes else None,
            strength=S.NCCL_SIZE_MISMATCH,
        )
    ]


def monitored_peer(ev: Evidence) -> list[Cause]:
    """monitoredBarrier on a rank other than 0: it reached the barrier and defers to rank 0's log."""
    events = ev.events
    seen = by_kind(events, "coll.monitored_peer")
    if not seen:
        return []
    return [
        Cause(
            code="COL002",
            summary=f"{who(sorted({e.rank for e in seen if e.rank is not None}))} reached the monitored barrier but "
            "could not hear from rank 0; rank 0's log names the ranks that never arrived",
            culprits=[],
            confidence="unknown",
            reason="PyTorch's monitored barrier reports the faulty ranks only on rank 0; this log is a reporter's",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.MONITORED_BARRIER,
            family="missing_rank",
        )
    ]


def peers_behind(ev: Evidence) -> list[Cause]:
    """A rank that finished a step reports that others did not (SGLang's "TP rank %d could finish the model loading,
    but there are other ranks that didn't finish loading"): ranks missing, not named; the reporters are not them."""
    seen = by_kind(ev.events, "coll.peers_behind")
    if not seen:
        return []
    reporters = sorted({int(e.data["reporter"]) for e in seen})
    return [
        Cause(
            code="COL002",
            summary=f"rank{'s' if len(reporters) > 1 else ''} {fold_ranks(reporters)} finished loading, other ranks "
            "did not (they failed, e.g. out of memory, or are slow); which, the message does not say",
            culprits=[],
            confidence="unknown",
            reason="the reporter is a rank that did finish: the missing ones are the others, not named here",
            evidence=[quote(e) for e in seen[:3]],
            strength=S.MONITORED_BARRIER,
            family="missing_rank",
        )
    ]


def watchdog(ev: Evidence) -> list[Cause]:
    """NCCL watchdog timeouts: a different op at the same sequence number, or silent ranks."""
    events, world = ev.events, ev.file_ranks
    out: list[Cause] = []
    seen = by_kind(events, "coll.watchdog_timeout")
    if not seen:
        return out
    at: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    sizes: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    subgroups = any(e.data.get("pg") not in (None, "?", "0") for e in events)
    for e in seen:
        if e.rank is not None and "seq" in e.data:
            at[(e.data.get("pg", "?"), e.data["seq"])].setdefault(e.rank, e.data.get("op", "?"))
            if "numel" in e.data:
                sizes[(e.data.get("pg", "?"), e.data["seq"])].setdefault(e.rank, e.data["numel"])
    for (pg, seq), ops in at.items():
        # an op cut short on its line (a terminal's overlay, a wrap: "_ALLGATHER_BA") is the longer one it begins
        names = set(ops.values())
        ops = {r: next((n for n in names if n != o and n.startswith(o)), o) for r, o in ops.items()}
        counts = Counter(ops.values()).most_common()
        numels = sizes.get((pg, seq), {})
        if len(counts) == 1 and counts[0][0] != "COALESCED" and not subgroups and len(set(numels.values())) > 1:
            # WorkNCCL's repr (ProcessGroupNCCL.cpp: "WorkNCCL(SeqNum=..., OpType=..., NumelIn=..."): one op at one
            # sequence number with different element counts is the same call made with different tensors (a
            # rank-dependent shape, e.g. MoE experts' gradients), which NCCL cannot match; which side is wrong the
            # reports alone do not say (the ranks that did not report may side with either). Not where the log shows
            # other process groups (ranks of different subgroups, e.g. pipeline stages, count their own sequence
            # numbers over their own tensors) nor for a coalesced op (each rank's own sum of tensors)
            parts = "; ".join(f"rank {r}: {n}" for r, n in sorted(numels.items()))
            out.append(
                Cause(
                    code="COL001",
                    summary=f"ranks ran {counts[0][0]} #{seq} with different sizes (NumelIn {parts})",
                    culprits=[],
                    confidence="unknown",
                    reason="the watchdog reports one OpType at one sequence number with different NumelIn",
                    evidence=[quote(e) for e in seen[:3]],
                    strength=S.NO_MAJORITY,
                )
            )
        # a vote is a majority of the group, not of the lines an excerpt kept: the world is at least the highest rank
        # any line names, and the ranks with files of their own (3 lines of an 8-rank job, 2 against 1, name nobody)
        seen_world = max([len(world), *(e.rank + 1 for e in events if e.rank is not None)])
        majority = len(counts) > 1 and counts[0][1] > counts[1][1] and counts[0][1] * 2 > seen_world
        if len(counts) > 1 and not majority:
            parts = "; ".join(f"rank {r}: {o}" for r, o in sorted(ops.items()))
            out.append(
                Cause(
                    code="COL001",
                    summary=f"ranks ran different collectives as #{seq} ({parts})",
                    culprits=[],
                    confidence="unknown",
                    reason="the watchdog reports different OpTypes at one sequence number and no majority of the "
                    f"{seen_world} or more ranks",
                    evidence=[quote(e) for e in seen[:3]],
                    strength=S.NO_MAJORITY,
                )
            )
        if majority:
            odd = sorted(r for r, o in ops.items() if o != counts[0][0])
            out.append(
                Cause(
                    code="COL001",
                    summary=f"{who(odd)} timed out in {ops[odd[0]]} #{seq} where {counts[0][1]} ranks ran {counts[0][0]}",
                    culprits=odd,
                    confidence="medium",
                    reason="the watchdog reports a different OpType at the same sequence number (majority vote)",
                    evidence=[quote(e) for e in seen if e.rank in odd][:3],
                    strength=S.TIMED_OUT_ELSEWHERE,
                )
            )
    reporting = ranks_of(e.rank for e in seen)
    silent = [r for r in world if r not in reporting]
    if reporting and silent and len(silent) * 2 < len(world):
        seqs = sorted({e.data["seq"] for e in seen if "seq" in e.data}, key=int)
        out.append(
            Cause(
                code="COL002",
                summary=f"{who(silent)} did not report the timeout of collective #{seqs[0] if seqs else '?'} that {who(reporting)} waited in",
                culprits=silent,
                confidence="medium",
                reason="every other rank with a log timed out in the collective; these ranks never reached it",
                evidence=[quote(seen[0])],
                strength=S.SILENT_IN_TIMEOUT,
            )
        )
    return out
