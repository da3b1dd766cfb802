"""All candidate causes -> one verdict: the failure class, the initiating ranks, how sure, why.

Evidence that names the culprit directly (traces, Flight Recorder, DETAIL fingerprints, the
desync report, NCCL's own init checks) outranks inference from who failed first, which outranks
"the earliest error". With none of them the verdict says "unknown" instead of guessing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from validator.diagnose import causes, causes_launch, causes_net, causes_ranks, collseq
from validator.diagnose import strength as S
from validator.diagnose.classify import classify
from validator.diagnose.codes import CLASS, VOCAB
from validator.diagnose.events import CONFIDENCE, Cause, Diagnosis, Event, Evidence, Role
from validator.diagnose.flightrec import DumpAnalysis
from validator.diagnose.sequences import Divergence, describe, enclosing_branch
from validator.diagnose.tracefile import TraceAnalysis
from validator.targets import fold_ranks

_KIND_CODE = {"mismatch": "COL001", "extra": "COL001", "split": "COL001", "skipped": "COL002", "stopped": "COL002"}


def from_divergence(d: Divergence, members: list[int], source: str, strength: int, files: dict[int, str]) -> Cause:
    confidence = "high" if d.confident and d.culprits and len(members) > 2 else "medium" if d.culprits else "unknown"
    how = {
        "majority": "by majority over the group's ranks",
        "missing": "no majority; the rank without the call did not join (NCCL's desync rule)",
        "branch": "no majority; only the named rank's call sits inside a branch (`"
        + str(enclosing_branch(next((c.site for c in d.actual.values() if c), None)) or "").split(" (")[0]
        + "`)",
        "none": "the group splits evenly: no majority, nobody named",
    }[d.basis]
    if d.basis == "branch":
        confidence = "low"
    if d.kind == "split":
        confidence = "unknown"
    culprit_call = next((c for c in d.actual.values() if c), None)
    stack = list(culprit_call.stack) if culprit_call and culprit_call.stack else []
    if not stack and d.expected and d.expected.stack:
        stack = list(d.expected.stack)
    evidence = [Evidence(files.get(r, source), f"rank {r}: {c.detail if c else 'no call'}{' at ' + c.site if c and c.site else ''}", r)
                for r, c in sorted(d.actual.items())][:3]  # fmt: skip
    if d.expected and d.majority:
        r0 = d.majority[0]
        evidence.append(
            Evidence(
                files.get(r0, source),
                f"rank {r0}: {d.expected.detail}{' at ' + d.expected.site if d.expected.site else ''}",
                r0,
            )
        )
    expected = d.expected.detail if d.expected else None
    actual = culprit_call.detail if culprit_call else ("no call" if d.culprits else None)
    if expected and actual == expected and d.expected and culprit_call and d.expected.site != culprit_call.site:
        expected, actual = f"{expected} at {d.expected.site}", f"{actual} at {culprit_call.site}"
    return Cause(
        _KIND_CODE[d.kind],
        describe(d) + (f" (process group {d.group})" if d.group != "0" else ""),
        d.culprits,
        confidence,
        f"{source}: collective #{d.index} compared across ranks {fold_ranks(members)}, {how}",
        evidence,
        expected=expected,
        actual=actual if actual != expected else None,
        stack=stack,
        strength=strength if confidence in ("high", "medium") else S.SPLIT if d.kind == "split" else S.PARTIAL,
    )


def _trace_endings(tr: TraceAnalysis | None, endings: dict[int, dict[str, object]]) -> list[Cause]:
    out = []
    for r, end in sorted(endings.items()):
        got = classify(f"{end.get('type')}: {end.get('msg')}")
        if got is not None and got[1] != Role.ORIGIN:
            continue  # a timeout or lost peer: collateral of another rank's failure, not a warning of its own
        if end.get("kind") == "exception":
            site = f" at {end.get('site')}" if end.get("site") else ""
            out.append(Cause("DGN010", f"rank {r} raised {end.get('type')}: {str(end.get('msg'))[:160]}{site}", [r], "high",
                             "its rehearsal trace ends with this exception", [Evidence(f"trace rank {r}", f"{end.get('type')}: {end.get('msg')}", r)],
                             strength=S.TRACE_EXCEPTION))  # fmt: skip
    if tr:
        for sentence in tr.p2p[:1]:
            out.append(
                Cause(
                    "COL004",
                    sentence,
                    [],
                    "medium",
                    "send/recv pairs counted per (sender, receiver) in the traces",
                    strength=S.P2P_UNMATCHED,
                )
            )
    return out


# Failures a host has on its own (its memory, its GPUs, its interfaces): the host that printed them is
# the one to look at, even when no rank is named. Not a peer's failure seen from here ("remote
# closed", a timeout), where the printing host is a victim.
_LOCAL = frozenset({"oom", "cuda_error", "nccl_init_no_interface", "nccl_init_duplicate_gpu"})
# NCCL system calls that fail on their own host's resources (an address to bind, memory to pin, a
# queue pair to create); not connect, nor ibv_modify_qp, which a wrong peer address fails too
_LOCAL_CALLS = ("bind", "socket", "listen", "register memory", "ibv_reg_mr", "ibv_create_qp", "ibv_alloc_pd",
                "ibv_open_device", "fallocate", "ftruncate", "mmap", "shm_open", "calloc", "malloc")  # fmt: skip


def _printed_on(cause: Cause, events: list[Event]) -> list[str]:
    """The hosts that printed a local failure's evidence (NCCL's and Ray's prefixes name them)."""
    sources = {e.source for e in cause.evidence}
    seen = [e for e in events if e.source in sources]
    family = cause.family or VOCAB.get(cause.code)
    calls = [str(e.data.get("call", "")).lower() for e in seen if e.kind == "nccl.syscall_failed"]
    local = family in _LOCAL or (
        family == "nccl_system_error" and bool(calls) and all(any(w in c for w in _LOCAL_CALLS) for c in calls)
    )
    hosts = sorted({e.ident.host for e in seen if e.ident.host}) if local else []
    return hosts if len(hosts) <= 8 else []


def decide(
    events: list[Event],
    dumps: DumpAnalysis | None = None,
    traces: TraceAnalysis | None = None,
    trace_endings: dict[int, dict[str, object]] | None = None,
    hosts: dict[int, str] | None = None,
    files: dict[int, str] | None = None,
    file_ranks: list[int] | None = None,
    coll: list[dict[str, Any]] | None = None,
) -> Diagnosis:
    hosts = hosts or {}
    cands: list[Cause] = []
    if traces:
        cands += [from_divergence(d, m, "rehearsal traces", S.TRACE, files or {}) for d, m in traces.divergences[:2]]
    if dumps:
        cands += [
            from_divergence(d, m, "Flight Recorder", S.FLIGHT_RECORDER, files or {}) for d, m in dumps.divergences[:2]
        ]
    cands += _trace_endings(traces, trace_endings or {})
    if coll and (c := collseq.first_divergence(coll)) is not None:
        cands.append(c)
    symptoms: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        if e.role in (Role.SYMPTOM, Role.SUMMARY) and e.rank is not None and not e.kind.startswith(("summary", "misc")):
            symptoms[e.rank].append(e)
    for build in (causes.detail_mismatch, causes.desync, causes.stopped, causes.uniqueid, causes_net.mismatch_pointer,
                  causes_net.store_barrier, causes_net.ras, causes_net.horovod, causes_net.versions,
                  causes_net.size_mismatch, causes_net.monitored_peer):  # fmt: skip
        if (c := build(events)) is not None:
            cands.append(c)
    cands += causes.nccl_init(events) + causes.store(events)
    if (c := causes.origins(events, symptoms)) is not None:
        cands.append(c)
    if (c := causes_launch.summaries(events, symptoms)) is not None:
        cands.append(c)
    cands += causes.watchdog(events, file_ranks or [])
    for c in (causes_ranks.different_waits(events), causes_ranks.silent_ranks(events, file_ranks or [])):
        # the watchdog's silent-rank rule reads the same evidence: one cause, not a corroboration
        if c is not None and not any(x.code == c.code and x.culprits == c.culprits for x in cands):
            cands.append(c)
    cands += _fallbacks(events)
    if not cands and (c := causes_net.unrecognised(events)) is not None:
        cands.append(c)
    for c in cands:
        c.hosts = c.hosts or sorted({hosts[r] for r in c.culprits if r in hosts})
    cands.sort(key=lambda c: (-c.strength, -CONFIDENCE[c.confidence]))
    primary = cands[0] if cands else None
    if primary is not None and not primary.hosts:
        primary.hosts = _printed_on(primary, events)
    if primary is not None:
        _corroborate(primary, cands[1:])
        if causes_ranks.backend(events) == "gloo":
            for c in cands:
                c.fix = causes_ranks.GLOO_FIX.get(c.code, c.fix)
    others = _distinct(primary, cands[1:]) if primary else []
    culprits = set(primary.culprits) if primary else set()
    if primary is not None and primary.code == "DGN013":
        failing = set()  # nothing known failed first, so nothing is a consequence either
    else:
        failing = {
            e.rank for e in events if e.role != Role.FACT and e.rank is not None and not e.kind.startswith("misc")
        }
        if primary is not None and not primary.culprits:  # ranks failing on their own are not consequences
            failing -= {e.rank for e in events if e.role == Role.ORIGIN}
    seen = sorted({e.rank for e in events if e.rank is not None} | set(file_ranks or []))
    klass = CLASS.get(primary.code, primary.code) if primary else "no failure found"
    vocab = (primary.family or VOCAB.get(primary.code, "unrecognised")) if primary else "none"
    return Diagnosis(klass, primary, others, sorted(r for r in failing if r not in culprits), seen, hosts,
                     vocab_class=vocab)  # fmt: skip


def _corroborate(primary: Cause, rest: list[Cause]) -> None:
    """Independent evidence naming the same ranks raises the confidence one step."""
    if primary.confidence not in ("medium", "low") or not primary.culprits:
        return
    for c in rest:
        if c.culprits == primary.culprits and c.reason != primary.reason and c.strength >= S.REPORTED:
            primary.confidence = "high" if primary.confidence == "medium" else "medium"
            primary.reason += f"; corroborated: {c.reason}"
            return


def _distinct(primary: Cause, rest: list[Cause]) -> list[Cause]:
    out: list[Cause] = []
    keys = {(primary.code, tuple(primary.culprits))}
    for c in rest:
        key = (c.code, tuple(c.culprits))
        if key in keys or c.strength < S.REPORTED or c.code == "COL003":
            continue
        keys.add(key)
        out.append(c)
    return out[:3]


def _fallbacks(events: list[Event]) -> list[Cause]:
    """Timeouts and NCCL errors with nothing better: name the class, not a culprit."""
    out = []
    nccl = causes.by_kind(events, *causes_net.NCCL_KINDS, "gloo.peer_closed")
    cuda = [e for e in nccl if "cuda" in str(e.data.get("what", "")).lower()]
    if cuda and not causes.by_kind(events, "cuda.error", "cuda.oom"):
        ranks = sorted({e.rank for e in cuda if e.rank is not None})
        out.append(Cause("DGN008", f"NCCL reports a CUDA failure on {causes._who(ranks)}", ranks, "medium" if len(ranks) == 1 else "low",
                         "NCCL's own error names a CUDA failure on these ranks", [causes.ev(e) for e in cuda[:3]], strength=S.NCCL_CUDA))  # fmt: skip
    net = causes_net.network(events)
    out += net
    timeouts = causes.by_kind(events, "coll.watchdog_timeout", "coll.gloo_timeout", "coll.blocking_wait", "coll.heartbeat",
                              "coll.watchdog_status", "coll.watchdog_teardown", "coll.dump_signal")  # fmt: skip
    if timeouts:
        ranks = sorted({e.rank for e in timeouts if e.rank is not None})
        out.append(Cause("COL003", f"{causes._who(ranks)} timed out in a collective; no rank failed differently", [], "unknown",
                         "all reporting ranks show the same timeout and nothing else names a culprit",
                         [causes.ev(e) for e in timeouts[:3]], strength=S.TIMEOUT_ONLY))  # fmt: skip
    fatal = [e for e in events if e.role != Role.FACT and e.time is not None and e.rank is not None
             and not e.kind.startswith("misc")]  # fmt: skip
    if fatal and not timeouts and not net:
        first = min(fatal, key=lambda e: e.time or 0.0)
        out.append(Cause("DGN007" if first.kind.startswith(("nccl", "gloo")) else "DGN010",
                         f"earliest error: rank {first.rank}: {first.text[:160]}", [int(first.rank)],  # type: ignore[arg-type]
                         "low", "the earliest error by timestamp; nothing else decides", [causes.ev(first)], time=first.time, strength=S.EARLIEST_ERROR))  # fmt: skip
    return out
