"""All candidate causes -> one verdict: the failure class, the initiating ranks, how sure, why.

``decide`` gathers (every rule of ``causes.CAUSES``), sorts (by ``strength.py`` level, then
confidence, then table order) and corroborates. Evidence that names the culprit directly (traces,
Flight Recorder, DETAIL fingerprints, the desync report, NCCL's own init checks) outranks inference
from who failed first, which outranks "the earliest error". With none of them the verdict says
"unknown" instead of guessing.
"""

from __future__ import annotations

from validator.diagnose import strength as S
from validator.diagnose.causes import CAUSES, RESTATING, Evidence
from validator.diagnose.causes.hangs import GLOO_FIX, backend
from validator.diagnose.codes import CLASS, VOCAB
from validator.diagnose.events import CONFIDENCE, Cause, Diagnosis, Event, Role
from validator.diagnose.families import LOOPBACK

# Failures a host has on its own (its memory, its GPUs, its interfaces): the host that printed them is
# the one to look at, even when no rank is named. Not a peer's failure seen from here ("remote
# closed", a timeout), where the printing host is a victim.
_LOCAL = frozenset({"oom", "cuda_error", "nccl_init_no_interface", "nccl_init_duplicate_gpu"})
# NCCL system calls that fail on their own host's resources (an address to bind, memory to pin, a
# queue pair to create); not connect, nor ibv_modify_qp, which a wrong peer address fails too
_LOCAL_CALLS = ("bind", "socket", "listen", "register memory", "ibv_reg_mr", "ibv_create_qp", "ibv_create_cq", "ibv_alloc_pd",
                "ibv_open_device", "fallocate", "ftruncate", "mmap", "shm_open", "shared memory", "calloc", "malloc",
                "real path")  # fmt: skip


def _printed_on(cause: Cause, events: list[Event]) -> list[str]:
    """The hosts that printed a local failure's evidence (NCCL's, Ray's and Open MPI's signal report's prefixes name
    them)."""
    sources = {e.source for e in cause.evidence}
    seen = [e for e in events if e.source in sources]
    family = cause.family or VOCAB.get(cause.code)
    calls = [str(e.data.get("call", "")).lower() for e in seen if e.kind == "nccl.syscall_failed"]
    local = (
        family in _LOCAL
        or (family == "nccl_system_error" and bool(calls) and all(any(w in c for w in _LOCAL_CALLS) for c in calls))
        or (bool(seen) and all(e.kind in ("proc.crash", "proc.signal") for e in seen))  # crashed where it ran
    )
    if not local:
        return []
    hosts = _named_hosts(seen)
    if not hosts:  # no host on the evidence's own lines: where every line that names one names the same, that one
        hosts = _named_hosts(events)[:2]
        return hosts if len(hosts) == 1 else []
    return hosts if len(hosts) <= 8 else []


def _named_hosts(events: list[Event]) -> list[str]:
    """The hosts the events' lines name, but loopback names ("localhost" says nothing of which node)."""
    return sorted({h for e in events if (h := e.ident.host) and not LOOPBACK.match(h)})


def gather(ev: Evidence) -> list[Cause]:
    """Every rule's candidates, in table order."""
    out: list[Cause] = []
    for rule in CAUSES:
        for c in rule(ev):
            if rule in RESTATING and any(x.code == c.code and x.culprits == c.culprits for x in out):
                continue
            out.append(c)
    return out


def decide(ev: Evidence) -> Diagnosis:
    events, hosts = ev.events, ev.hosts
    cands = gather(ev)
    for c in cands:
        c.hosts = c.hosts or sorted({hosts[r] for r in c.culprits if r in hosts})
    cands.sort(key=lambda c: (-c.strength, -CONFIDENCE[c.confidence]))  # stable: table order breaks ties
    primary = cands[0] if cands else None
    if primary is not None and not primary.hosts:
        primary.hosts = _printed_on(primary, events)
    if primary is not None:
        _corroborate(primary, cands[1:])
        if backend(events) == "gloo":
            for c in cands:
                c.fix = GLOO_FIX.get(c.code, c.fix)
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
    seen = sorted({e.rank for e in events if e.rank is not None} | set(ev.file_ranks))
    klass = CLASS.get(primary.code, primary.code) if primary else "no failure found"
    vocab = (primary.family or VOCAB.get(primary.code, "unrecognised")) if primary else "none"
    collateral = sorted(r for r in failing if r not in culprits)
    return Diagnosis(klass, primary, others, collateral, seen, hosts, vocab_class=vocab)


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
